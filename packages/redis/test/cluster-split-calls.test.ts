// Exists because `stats().calls` counted one call where a Cluster pipeline went as two: ioredis
// refused a pipeline whose slots it now mapped to two masters and its adapter sent each call alone,
// and node-redis routed each call of one to its own master.
/**
 * On a real 3-master Cluster, with each client library: two ops on two slots of master a wait in
 * a's queue behind a held call (`CLIENT PAUSE … WRITE`, `maxInFlight: 1`). One of the slots has
 * moved to master b, unseen by the client. Either the client learns of the move before the two
 * leave (a MOVED on a plain GET), and they go as one call to each master; or it does not, a
 * answers MOVED for one of them, and that one goes again alone. Either way the store counts the
 * round trips it made, and where the client did not redirect anything itself, as many as Redis ran.
 */
import { defineLimit } from '@tiered-limiter/core';
import { bucketKey, RedisStore } from '@tiered-limiter/redis';
import {
  CLIENT_KINDS,
  type ClientKind,
  type ClusterNode,
  readCommandStats,
  uniquePrefix,
  waitUntil,
} from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { clusterForFile } from './cluster-file.js';

const slow = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'slow' });
/** Longest master a holds writes; the test lifts the pause well before. */
const PAUSE_MS = 5000;

const { cluster, connect, startMigration, finishMigration } = clusterForFile();

/** `host:port` of the master `client` sends `slot` to, as it sees the slot map now. */
function seenOwner(kind: ClientKind, client: object, slot: number): string | undefined {
  if (kind === 'node-redis') {
    return (client as { slots: ({ master: { address: string } } | undefined)[] }).slots[slot]?.master.address;
  }
  return (client as { slots: (string[] | undefined)[] }).slots[slot]?.[0];
}

/** Script calls Redis ran (or refused before running), summed over the masters. */
async function scriptCalls(masters: readonly Redis[]): Promise<number> {
  let total = 0;
  for (const master of masters) {
    for (const [command, stat] of await readCommandStats(master)) {
      if (command === 'evalsha' || command === 'eval') total += stat.calls;
    }
  }
  return total;
}

/** Whether the client learns of the move before the two ops leave. */
type Seen = 'seen' | 'unseen';

describe.each(CLIENT_KINDS)('%s: two slots of one master, one moved since', (kind) => {
  it.each<Seen>(['seen', 'unseen'])(
    '%s by the client: stats().calls counts every round trip',
    async (seen) => {
      const override = kind === 'node-redis' ? {} : { slotsRefreshInterval: 0 };
      const client = await connect(kind, { override });
      const prefix = uniquePrefix('split');
      const store = new RedisStore({ redis: client.client, prefix, coalesce: { maxInFlight: 1 } });
      const [a, b, c] = cluster().nodes as [ClusterNode, ClusterNode, ClusterNode];
      const masters = cluster().nodes.map((node) => cluster().nodeClient(node));
      const admin = masters[0]!;
      const ranges = (await admin.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
      const ownerIdOf = (slot: number) => ranges.find(([from, to]) => from <= slot && slot <= to)![2][2];
      const taken = new Set<number>();
      const pick = (label: string, owner: ClusterNode) => {
        for (let i = 0; ; i++) {
          const user = `${kind}-${seen}-${label}-${i}`;
          const slot = store.groupOf(user);
          if (!taken.has(slot) && ownerIdOf(slot) === owner.id) {
            taken.add(slot);
            return user;
          }
        }
      };
      const [held, stays, moves, mover] = [
        pick('held', a),
        pick('stays', a),
        pick('moves', a),
        pick('mover', c),
      ];
      // The script in every master's cache (a NOSCRIPT would add an EVAL), the moving keys made.
      await Promise.all(
        [held, stays, moves, mover, pick('warm-b', b)].map((key) =>
          store.apply({ key, limits: [slow], take: 1 }),
        ),
      );
      for (const user of [moves, mover]) {
        await finishMigration(await startMigration(store.groupOf(user), admin, b));
      }
      expect(seenOwner(kind, client.client, store.groupOf(moves))).toBe(`${a.host}:${a.port}`);

      const before = { calls: store.stats().calls, redis: await scriptCalls(masters) };
      const fromA = cluster().nodeClient(a);
      await fromA.call('CLIENT', 'PAUSE', PAUSE_MS, 'WRITE');
      let replies: { ok: boolean }[];
      try {
        const out = [store.apply({ key: held, limits: [slow], take: 1 })];
        await new Promise((resolve) => setImmediate(resolve));
        out.push(
          store.apply({ key: stays, limits: [slow], take: 1 }),
          store.apply({ key: moves, limits: [slow], take: 1 }),
        );
        await new Promise((resolve) => setImmediate(resolve));
        // The held call is out; the two ops wait in a's queue.
        expect(store.stats().calls - before.calls).toBe(1);
        if (seen === 'seen') {
          // A GET on the mover's key, answered MOVED by c, teaches the client the new map; no script runs.
          await (client.client as { get(key: string): Promise<unknown> }).get(
            bucketKey(prefix, mover, slow.name),
          );
          await waitUntil(
            'the client maps the moved slot to its new owner',
            () =>
              Promise.resolve(seenOwner(kind, client.client, store.groupOf(moves)) === `${b.host}:${b.port}`),
            2000,
          );
        }
        await fromA.call('CLIENT', 'UNPAUSE');
        replies = await Promise.all(out);
      } finally {
        await fromA.call('CLIENT', 'UNPAUSE');
      }
      expect(replies.map((r) => r.ok)).toEqual([true, true, true]);
      const calls = store.stats().calls - before.calls;
      if (seen === 'seen') {
        // The held call, then one to each master. Before: 2 (the pair counted as one).
        expect(calls).toBe(3);
        expect(calls).toBe((await scriptCalls(masters)) - before.redis);
      } else {
        // The held call, the pair to a, then the op a answered MOVED, alone. Before: 2. node-redis
        // follows a MOVED itself, within the pair's call: the store sends nothing again.
        expect(calls).toBe(kind === 'node-redis' ? 2 : 3);
      }
      expect((await store.apply({ key: moves, limits: [slow] })).remaining).toBe(slow.capacity - 2);
    },
  );
});
