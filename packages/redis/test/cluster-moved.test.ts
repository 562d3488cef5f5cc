/**
 * The coalesced operation on a real 3-master Cluster while a slot moves under it: batches are in
 * flight (one EVALSHA per slot, several slots of one master as one pipeline) when the slot is
 * MIGRATING (ASK, TRYAGAIN) and then moved (MOVED). Every op gets a reply or a StoreError (only an
 * op of the moving slot may get the error), an op answered ran exactly once, and none ran twice. And
 * a call whose keys the migration has split gets TRYAGAIN, is tried again (node-redis does not, so
 * its adapter does) and is answered once the slot has moved. On each client library.
 *
 * Kept split, such a call fails with a StoreError having run nothing: after node-redis' adapter's
 * 5 tries 100 ms apart, or the retries of ioredis and iovalkey. And a call whose keys have all
 * moved to the target while the slot is still the source's is redirected by ASK alone, followed
 * with ASKING, and runs on the target once.
 */
import { defineLimit, StoreError } from '@tiered-limiter/core';
import { bucketKeys, RedisStore } from '@tiered-limiter/redis';
import { CLIENT_KINDS, type ClientKind, uniquePrefix } from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { clusterForFile, type Migration } from './cluster-file.js';
import { readBucket } from './stored-bucket.js';

const slow = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'slow' });
const SHARDS = 8;
const BURST = 64;
const MAX_BURSTS = 400;

const { cluster, connect, startMigration, moveKeys, finishMigration } = clusterForFile();

async function errorCount(node: Redis, kind: 'MOVED' | 'ASK' | 'TRYAGAIN'): Promise<number> {
  const match = new RegExp(`errorstat_${kind}:count=(\\d+)`).exec(await node.info('errorstats'));
  return match ? Number(match[1]) : 0;
}

/** Moves `slot` from its owner to another master, key by key, while clients keep writing to it. */
async function migrate(slot: number, admin: Redis): Promise<Migration> {
  const migration = await startMigration(slot, admin);
  await finishMigration(migration, 5); // let batches land mid-migration
  return migration;
}

describe.each(CLIENT_KINDS)('%s: a slot migrated while coalesced batches are in flight', (kind) => {
  it('every op gets a reply or a StoreError; an answered op ran once; none ran twice', async () => {
    const client = await connect(kind);
    const prefix = uniquePrefix('moved');
    const store = new RedisStore({ redis: client.client, prefix, shards: SHARDS });
    const admin = cluster().nodeClient(cluster().nodes[0]!);
    // The slot of shard 0, which about an eighth of the ops' keys hash to.
    const movingKey = bucketKeys(prefix, 'x', [slow], SHARDS)[0]!;
    const slot = Number(await admin.call('CLUSTER', 'KEYSLOT', movingKey));
    const tagOf = (bucketKey: string) => /\{[^}]*\}/.exec(bucketKey)![0];
    const inMovingSlot = (key: string) =>
      tagOf(bucketKeys(prefix, key, [slow], SHARDS)[0]!) === tagOf(movingKey);
    const outcomes = new Map<string, 'ok' | 'error'>();
    const errors = new Set<string>();
    let next = 0;
    let migrated = false;
    const load = (async () => {
      for (let burst = 0; burst < MAX_BURSTS && !migrated; burst++) {
        const keys = Array.from({ length: BURST }, (_, i) => `u${next}-${i}`);
        next++;
        await Promise.all(
          keys.map((key) =>
            store.apply({ key, limits: [slow], take: 1 }).then(
              () => outcomes.set(key, 'ok'),
              (error: unknown) => {
                expect(error).toBeInstanceOf(StoreError);
                errors.add(String((error as Error).message).slice(0, 60));
                outcomes.set(key, 'error');
              },
            ),
          ),
        );
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const before = { moved: 0, ask: 0 };
    const { source } = await migrate(slot, admin);
    const sourceClient = cluster().nodeClient(source);
    before.moved = await errorCount(sourceClient, 'MOVED');
    await new Promise((resolve) => setTimeout(resolve, 300)); // batches still routed to the source
    migrated = true;
    await load;

    const checker = await connect('ioredis');
    const check = new RedisStore({ redis: checker.client, prefix, shards: SHARDS });
    const keys = [...outcomes.keys()];
    const peeks = await Promise.all(keys.map((key) => check.apply({ key, limits: [slow] })));
    const taken = peeks.map((p) => slow.capacity - p.remaining);
    const answered = keys.filter((key) => outcomes.get(key) === 'ok');
    keys.forEach((key, i) => {
      expect(taken[i]).toBeLessThanOrEqual(1);
      if (outcomes.get(key) === 'ok') expect(taken[i]).toBe(1);
    });
    console.info(
      `${kind}: ${keys.length} ops, ${answered.length} answered, ${keys.length - answered.length} StoreErrors`,
      [...errors],
      `store: ${JSON.stringify(store.stats())}`,
    );
    expect(answered.length).toBeGreaterThan(keys.length / 2);
    // A slot that did not move never fails: its calls shared pipelines with the moving one's, and
    // a redirected part of a pipeline goes again alone, never the whole pipeline, never failing the rest.
    const failedElsewhere = keys.filter((key) => outcomes.get(key) === 'error' && !inMovingSlot(key));
    expect(failedElsewhere).toEqual([]);
    expect(keys.filter(inMovingSlot).length).toBeGreaterThan(0);
    // The source sent redirections while the slot moved.
    expect(
      before.moved + (await errorCount(sourceClient, 'ASK')) + (await errorCount(sourceClient, 'TRYAGAIN')),
    ).toBeGreaterThan(0);
  });
});

const first = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'first' });
const second = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'second' });

describe.each(CLIENT_KINDS)('%s: a call whose keys a migration has split', (kind) => {
  it('gets TRYAGAIN, is tried again until the slot has moved, and is then answered, once', async () => {
    const client = await connect(kind);
    const prefix = uniquePrefix('split');
    const store = new RedisStore({ redis: client.client, prefix });
    const limits = [first, second];
    await store.apply({ key: 'user', limits, take: 1 }); // both of the user's buckets on their master
    const [firstKey, secondKey] = bucketKeys(prefix, 'user', limits);
    const admin = cluster().nodeClient(cluster().nodes[0]!);
    const slot = Number(await admin.call('CLUSTER', 'KEYSLOT', firstKey!));
    const migration = await startMigration(slot, admin);
    const { from } = migration;
    // One bucket moved, the other not yet: a call for both is refused with TRYAGAIN (Redis ran nothing).
    await moveKeys(migration, [secondKey!]);
    const tryAgainBefore = await errorCount(from, 'TRYAGAIN');
    const pending = store.apply({ key: 'user', limits, take: 1 });
    // Awaited below; should a step before fail, its rejection must not also surface as unhandled.
    pending.catch(() => {});
    const refusedBy = performance.now() + 2000;
    while ((await errorCount(from, 'TRYAGAIN')) === tryAgainBefore && performance.now() < refusedBy) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(await errorCount(from, 'TRYAGAIN')).toBeGreaterThan(tryAgainBefore);
    // The slot's other keys too, as a resharding does: every test of this block uses the tag
    // {user}, one slot, so the source still holds the buckets of the client kind before.
    await finishMigration(migration);
    const reply = await pending;
    expect(reply.ok).toBe(true);
    // Taken once by this call: 10 − 1 (before) − 1.
    expect(reply.remaining).toBe(8);
    const peek = await new RedisStore({ redis: migration.to, prefix }).apply({
      key: 'user',
      limits,
    });
    expect(peek.remaining).toBe(8);
  });
});

/** node-redis' adapter's TRYAGAIN retries, as the README has them: 5 tries, 100 ms apart. */
const TRYAGAIN_TRIES = 5;
const TRYAGAIN_PAUSE_MS = 100;
/** Timers may fire a fraction of a ms early against `performance.now()`. */
const TIMER_SLACK_MS = 5;

/**
 * A `kind` client's call that takes a token from each of a user's two buckets, the buckets made
 * (one token taken) in a slot of their own, and that slot now migrating to another master with
 * no key moved yet.
 */
async function callOnMigratingSlot(kind: ClientKind, label: string) {
  const client = await connect(kind);
  const prefix = uniquePrefix(label);
  const store = new RedisStore({ redis: client.client, prefix });
  const limits = [first, second];
  const user = `${label}-${kind}`; // a slot of its own: no other test's keys in it
  const call = () => store.apply({ key: user, limits, take: 1 });
  await call();
  const keys = bucketKeys(prefix, user, limits) as [string, string];
  const admin = cluster().nodeClient(cluster().nodes[0]!);
  const migration = await startMigration(Number(await admin.call('CLUSTER', 'KEYSLOT', keys[0])), admin);
  return { call, keys, migration };
}

/**
 * The call of `callOnMigratingSlot` made while the migration has moved one of its buckets and
 * leaves the other where it is: every try is refused with TRYAGAIN. What became of it, and the
 * reply to the same call once the slot has finished moving.
 */
async function callKeptSplit(kind: ClientKind) {
  const { call, keys, migration } = await callOnMigratingSlot(kind, 'stuck');
  const [firstKey, secondKey] = keys;
  await moveKeys(migration, [secondKey]);
  const buckets = () =>
    Promise.all([readBucket(migration.from, firstKey), readBucket(migration.to, secondKey, true)]);
  const bucketsBefore = await buckets();
  const tryAgainsBefore = await errorCount(migration.from, 'TRYAGAIN');

  const started = performance.now();
  const failure = await call().then(
    () => 'answered',
    (error: unknown) => error,
  );
  const elapsedMs = performance.now() - started;
  const tryAgains = (await errorCount(migration.from, 'TRYAGAIN')) - tryAgainsBefore;
  const bucketsAfter = await buckets();

  await finishMigration(migration);
  const replyOnceMoved = await call();
  return { failure, elapsedMs, tryAgains, bucketsBefore, bucketsAfter, replyOnceMoved };
}

describe('node-redis: a call whose keys a migration keeps split', () => {
  it(`gives up after ${TRYAGAIN_TRIES} tries ${TRYAGAIN_PAUSE_MS} ms apart with a StoreError, having run nothing`, async () => {
    const split = await callKeptSplit('node-redis');

    expect(split.failure).toBeInstanceOf(StoreError);
    expect((split.failure as StoreError).message).toMatch(/TRYAGAIN/);
    expect(split.tryAgains).toBe(TRYAGAIN_TRIES);
    // A pause between tries, none after the last; the upper bound leaves a loaded 2-core machine room.
    expect(split.elapsedMs).toBeGreaterThanOrEqual((TRYAGAIN_TRIES - 1) * TRYAGAIN_PAUSE_MS - TIMER_SLACK_MS);
    expect(split.elapsedMs).toBeLessThan(2000);
    expect(split.bucketsAfter).toEqual(split.bucketsBefore);
    // Once the slot has moved the call is answered, from buckets the failed call left as they were.
    expect(split.replyOnceMoved.ok).toBe(true);
    expect(split.replyOnceMoved.remaining).toBe(first.capacity - 2);
  });
});

describe.each(['ioredis', 'iovalkey'] as const)('%s: a call whose keys a migration keeps split', (kind) => {
  // The library retries TRYAGAIN itself, `retryDelayOnTryAgain` (100 ms) apart, within its
  // `maxRedirections` (16, shared with the MOVED a retry sent to another node gets): not the
  // adapter's 5 tries, so only that it retried, apart, and ran nothing.
  it(`is retried by the library ${TRYAGAIN_PAUSE_MS} ms apart, then fails with a StoreError, having run nothing`, async () => {
    const split = await callKeptSplit(kind);

    expect(split.failure).toBeInstanceOf(StoreError);
    expect(split.tryAgains).toBeGreaterThan(1);
    expect(split.elapsedMs).toBeGreaterThanOrEqual(
      (split.tryAgains - 1) * TRYAGAIN_PAUSE_MS - TIMER_SLACK_MS,
    );
    expect(split.bucketsAfter).toEqual(split.bucketsBefore);
    expect(split.replyOnceMoved.ok).toBe(true);
    expect(split.replyOnceMoved.remaining).toBe(first.capacity - 2);
  });
});

describe.each(CLIENT_KINDS)('%s: a call whose keys are all on the migration target already', (kind) => {
  it('is redirected by ASK, follows it with ASKING, and runs on the target, once', async () => {
    const { call, keys, migration } = await callOnMigratingSlot(kind, 'asked');
    // Every key of the call moved, the slot still the source's: the source answers ASK.
    await moveKeys(migration, keys);
    const buckets = () => Promise.all(keys.map((key) => readBucket(migration.to, key, true)));
    const stored = await buckets();
    expect(stored).not.toContain(null);
    const asksBefore = await errorCount(migration.from, 'ASK');

    const reply = await call();

    expect(reply.ok).toBe(true);
    expect(reply.remaining).toBe(first.capacity - 2);
    expect(await errorCount(migration.from, 'ASK')).toBeGreaterThan(asksBefore);
    // Each bucket on the target took the call's token once (refill at 0.001/s adds next to nothing).
    const taken = (await buckets()).map((bucket, i) => stored[i]!.tokens - bucket!.tokens);
    for (const tokens of taken) expect(tokens).toBeCloseTo(1, 2);

    await finishMigration(migration);
  });
});
