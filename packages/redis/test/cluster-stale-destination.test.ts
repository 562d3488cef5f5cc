// Exists because a key's ops went to two masters once its slot moved: a charge queued for, or on its
// way to, the old master was overtaken by a later look sent straight to the new one.
/**
 * On a real 3-master Cluster, with each client library: slot S (a user's) moves to another master,
 * and the client has not yet seen it. The old master's calls are held (`CLIENT PAUSE … WRITE`), so
 * with `maxInFlight: 1` a charge on the user (a background debit, `keyOrdered`) waits in the old
 * master's queue. The client then learns the new slot map (a MOVED on another slot's op), and a look
 * at the same user is made. The look must see the charge: the store's promise that a look or take
 * sees every charge queued before it. Before the fix the look was queued at the new master's
 * destination, left at once, and read the bucket full.
 */
import { defineLimit } from '@tiered-limiter/core';
import { RedisStore } from '@tiered-limiter/redis';
import {
  CLIENT_KINDS,
  type ClientKind,
  type ClusterNode,
  uniquePrefix,
  waitUntil,
} from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { clusterForFile } from './cluster-file.js';

const slow = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'slow' });
const CHARGE = 3;
/** Longest the old master holds writes; the test lifts the pause well before. */
const PAUSE_MS = 5000;
/** Time for a look that is not held to be answered, on a loaded 2-core machine. */
const LOOK_ANSWERED_MS = 300;

const { cluster, connect, ownerOf, startMigration, finishMigration } = clusterForFile();

/** Gives `slot` to `target` as a resharding does (its keys moved too), unseen by clients. */
async function giveSlot(slot: number, target: ClusterNode, admin: Redis): Promise<void> {
  await finishMigration(await startMigration(slot, admin, target));
}

/** `host:port` of the master `client` sends `slot` to, as it sees the slot map now. */
function seenOwner(kind: ClientKind, client: object, slot: number): string | undefined {
  if (kind === 'node-redis') {
    return (client as { slots: ({ master: { address: string } } | undefined)[] }).slots[slot]?.master.address;
  }
  return (client as { slots: (string[] | undefined)[] }).slots[slot]?.[0];
}

/** The first `user-<i>` whose slot `test` accepts and that no earlier pick took. */
function pickUser(
  store: RedisStore,
  label: string,
  test: (slot: number) => boolean,
  taken: Set<number>,
): string {
  for (let i = 0; i < 100_000; i++) {
    const user = `${label}-${i}`;
    const slot = store.groupOf(user);
    if (!taken.has(slot) && test(slot)) {
      taken.add(slot);
      return user;
    }
  }
  throw new Error(`no user for ${label}`);
}

/**
 * Where the charge is when the client learns the move: `queued` behind the old master's two held calls
 * (`maxInFlight: 1` and the call of background ops beside it), or `sent` in a second call to the old
 * master, behind the first on its connection, to be answered MOVED once the pause ends.
 */
type ChargeAt = 'queued' | 'sent';

describe.each(CLIENT_KINDS)('%s: a charge for a master that has lost the slot since', (kind) => {
  it.each<ChargeAt>(['queued', 'sent'])(
    '%s: is seen by a look at the same key made once the client knows the new owner',
    async (chargeAt) => {
      // No periodic refresh: the client must learn of the move from the MOVED the test provokes,
      // after the charge (a refresh before that would route the charge to the new owner at once).
      const override = kind === 'node-redis' ? {} : { slotsRefreshInterval: 0 };
      const client = await connect(kind, { override });
      const admin = cluster().nodeClient(cluster().nodes[0]!);
      const store = new RedisStore({
        redis: client.client,
        prefix: uniquePrefix('stale'),
        coalesce: { maxInFlight: chargeAt === 'queued' ? 1 : 2 },
      });
      const [a, b, c] = cluster().nodes as [ClusterNode, ClusterNode, ClusterNode];
      const ranges = (await admin.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
      const ownerIdOf = (slot: number) => ranges.find(([from, to]) => from <= slot && slot <= to)![2][2];
      const taken = new Set<number>();
      const label = `${kind}-${chargeAt}`;
      const user = pickUser(store, `${label}-user`, (slot) => ownerIdOf(slot) === a.id, taken);
      const heldTake = pickUser(store, `${label}-held`, (slot) => ownerIdOf(slot) === a.id, taken);
      const heldSync = pickUser(store, `${label}-sync`, (slot) => ownerIdOf(slot) === a.id, taken);
      const mover = pickUser(store, `${label}-mover`, (slot) => ownerIdOf(slot) === c.id, taken);
      const slot = store.groupOf(user);
      expect((await ownerOf(admin, slot)).id).toBe(a.id);
      // The script loaded on every master's connection (a NOSCRIPT would send EVAL, a write).
      await Promise.all(
        cluster().nodes.map((_, i) => store.apply({ key: `${label}-warm-${i}`, limits: [slow] })),
      );
      await Promise.all([heldTake, heldSync, mover].map((key) => store.apply({ key, limits: [slow] })));

      // The user's slot and the mover's go to b; the client still maps them to a and c.
      await giveSlot(slot, b, admin);
      await giveSlot(store.groupOf(mover), b, admin);
      expect(seenOwner(kind, client.client, slot)).toBe(`${a.host}:${a.port}`);

      const fromA = cluster().nodeClient(a);
      await fromA.call('CLIENT', 'PAUSE', PAUSE_MS, 'WRITE');
      try {
        // A request's call to a, held.
        const held = [store.apply({ key: heldTake, limits: [slow], take: 1 })];
        await new Promise((resolve) => setImmediate(resolve));
        if (chargeAt === 'queued') {
          // a's other call taken too: background ops alone, beside it.
          held.push(store.apply({ key: heldSync, limits: [slow], credit: 1, background: true }));
          await new Promise((resolve) => setImmediate(resolve));
        }
        const callsBefore = store.stats().calls;
        // Tokens already admitted, charged in the background.
        const charge = store.apply({ key: user, limits: [slow], debit: CHARGE, background: true });
        charge.catch(() => {});
        await new Promise((resolve) => setImmediate(resolve));
        expect(store.stats().calls - callsBefore).toBe(chargeAt === 'queued' ? 0 : 1);

        // Another slot's op is answered MOVED by c: the client learns the new map.
        expect((await store.apply({ key: mover, limits: [slow], take: 1 })).ok).toBe(true);
        await waitUntil(
          'the client maps the user’s slot to its new owner',
          () => Promise.resolve(seenOwner(kind, client.client, slot) === `${b.host}:${b.port}`),
          2000,
        );

        const look = store.apply({ key: user, limits: [slow] });
        look.catch(() => {});
        // Answered now, the look would have read the bucket ahead of the charge made before it.
        await new Promise((resolve) => setTimeout(resolve, LOOK_ANSWERED_MS));
        await fromA.call('CLIENT', 'UNPAUSE');
        await Promise.all(held);
        await charge;
        expect((await look).remaining).toBe(slow.capacity - CHARGE);
      } finally {
        await fromA.call('CLIENT', 'UNPAUSE');
      }
      // The charge ran once, on the slot's new owner.
      expect((await store.apply({ key: user, limits: [slow] })).remaining).toBe(slow.capacity - CHARGE);
    },
  );
});
