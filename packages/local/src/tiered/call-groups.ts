import type { Lease } from './lease.js';

/** Call groups a store may name: a Redis Cluster's slots. */
export const CALL_GROUPS = 16_384;

/**
 * `leases` ordered by their store's call group (`GlobalStore.groupOf`), keys of one group in the
 * order they came: a round sent in this order has the ops that leave together share calls. On a
 * Cluster without shards each user key is a slot of its own, and a round in arrival order paid a
 * script call per key; in slot order 100,000 keys share 16,384 slots, about 6 keys a call. A
 * counting sort, linear in the keys: a comparison sort of 100,000 leases held the event loop for
 * tens of ms every round. Each lease asks its group once; a group out of range, or a throw, counts as 0.
 */
export function inCallGroupOrder(
  leases: readonly Lease[],
  groupOf: (key: string) => number,
): readonly Lease[] {
  const counts = new Uint32Array(CALL_GROUPS + 1);
  let first = -1;
  let mixed = false;
  for (const lease of leases) {
    if (lease.group < 0) {
      let group: number;
      try {
        group = groupOf(lease.key);
      } catch {
        // A custom store's `groupOf` that threw threw out of the sync's tick: no round, and an
        // uncaught exception. The group only orders the round.
        group = 0;
      }
      lease.group = Number.isInteger(group) && group >= 0 && group < CALL_GROUPS ? group : 0;
    }
    counts[lease.group + 1]!++;
    if (first < 0) first = lease.group;
    else if (lease.group !== first) mixed = true;
  }
  if (!mixed) return leases;
  for (let g = 1; g <= CALL_GROUPS; g++) counts[g]! += counts[g - 1]!;
  const ordered = new Array<Lease>(leases.length);
  for (const lease of leases) ordered[counts[lease.group]!++] = lease;
  return ordered;
}
