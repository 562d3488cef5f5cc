import { defineLimit } from '@tiered-limiter/core';
import { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { RedisStore } from '@tiered-limiter/redis';
import { uniquePrefix } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { redisFileKit } from './src/redis-file-kit.js';

// The management calls of both store-backed limiters on a real Redis, where the package tests
// (packages/local/test: tiered-set-limits, tiered-penalty-lease, tiered-peek, peek-shadow) check them on a MemoryStore and fake time. Limits that refill one token per
// 1,000 s keep every count exact in real time.
const FIVE = defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'five' });
const HUNDRED = defineLimit({ capacity: 100, refillPerSecond: 0.001, name: 'hundred' });

const kit = redisFileKit();

async function store() {
  return new RedisStore({ redis: await kit.redis(), prefix: uniquePrefix('manage') });
}

const common = { failurePolicy: 'closed' as const, timeoutMs: 1_000 };

/** How many of `n` decisions of `cost` for `key` are admitted, one after another. */
async function admitted(limiter: TieredLimiter | RequestLimiter, key: string, n: number, cost = 1) {
  let count = 0;
  for (let i = 0; i < n; i++) {
    const fast = limiter instanceof TieredLimiter ? limiter.tryConsume(key, cost) : undefined;
    if ((fast ?? (await limiter.consume(key, cost))).allowed) count++;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return count;
}

describe('management calls on a real Redis', () => {
  it('setLimits to a renamed limit: a full bucket, though the old limit had denied', async () => {
    const tiered = new TieredLimiter({ ...common, store: await store(), limits: FIVE, sync: false });
    kit.track(tiered);
    expect(await admitted(tiered, 'k', 6)).toBe(5);
    tiered.setLimits(defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'renamed' }));
    expect(await admitted(tiered, 'k', 6)).toBe(5);
  });

  it('setLimits to a renamed limit: the old lease goes back to the old bucket, creating nothing in the new', async () => {
    // Its hand-back (a background op) and the next request's lease under the new name leave in one
    // coalesced call, the lease first, in the same generation: sent under the new name, the hand-back
    // of 19 was counted against that lease, and 119 were admitted from a bucket of 100.
    const old = defineLimit({ capacity: 100, refillPerSecond: 0.001, name: 'old' });
    const tiered = new TieredLimiter({
      ...common,
      store: await store(),
      limits: old,
      sync: false,
      lease: { minBatch: 20 },
    });
    kit.track(tiered);
    expect(await admitted(tiered, 'k', 1)).toBe(1);
    tiered.setLimits(defineLimit({ capacity: 100, refillPerSecond: 0.001, name: 'new' }));
    expect(await admitted(tiered, 'k', 150)).toBe(100);
  });

  it('penalty into debt denies at once on both limiters, a lease held or not', async () => {
    const request = new RequestLimiter({ ...common, store: await store(), limits: HUNDRED });
    const tiered = new TieredLimiter({
      ...common,
      store: await store(),
      limits: HUNDRED,
      sync: false,
      lease: { minBatch: 20 },
    });
    kit.track(request);
    kit.track(tiered);
    for (const limiter of [request, tiered]) {
      expect(await admitted(limiter, 'k', 3)).toBe(3);
      expect(await limiter.penalty('k', 100)).toBe(true);
      expect(await admitted(limiter, 'k', 20)).toBe(0);
    }
  });

  it('peek with the periodic sync allows what a request that may borrow would get', async () => {
    const ten = defineLimit({ capacity: 5, refillPerSecond: 10, name: 'ten' });
    const tiered = new TieredLimiter({ ...common, store: await store(), limits: ten, instances: 200 });
    kit.track(tiered);
    const mismatches: number[] = [];
    for (let i = 0; i < 12; i++) {
      const peeked = await tiered.peek('k');
      const allowed = (await admitted(tiered, 'k', 1)) === 1;
      if (!peeked.allowed && allowed) mismatches.push(i);
    }
    expect(mismatches).toEqual([]);
  });

  it('peek in shadow mode admits, as a request would', async () => {
    const request = new RequestLimiter({ ...common, store: await store(), limits: FIVE, shadow: true });
    kit.track(request);
    await admitted(request, 'k', 6);
    expect(await request.peek('k')).toMatchObject({ allowed: true, shadowDenied: true });
  });

  it('rememberDenials keeps no denial asked for before a reset or reward that landed', async () => {
    // The request's op and the call leave in one coalesced call, the request's first: the bucket
    // turned it away, then was reset (or given a token). Kept, its denial turned the key away here
    // for 1,000 s with the store holding a token (packages/local/test/request-limiter-denials).
    for (const call of ['reset', 'reward'] as const) {
      const request = new RequestLimiter({
        ...common,
        store: await store(),
        limits: FIVE,
        rememberDenials: true,
      });
      kit.track(request);
      expect(await admitted(request, 'k', 5)).toBe(5);
      const pending = request.consume('k');
      const done = call === 'reset' ? request.reset('k') : request.reward('k', 1);
      expect(await pending).toMatchObject({ allowed: false, tier: 'global' });
      expect(await done).toBe(true);
      expect(await request.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
    }
  });

  it('TieredLimiter keeps no denial asked for before a reward that landed, with the sync or not', async () => {
    // As above: the request's refill and the reward leave in one coalesced call, the refill first,
    // and the bucket turns it away before the reward lands. Kept, its denial turned the key away
    // here for 1,000 s with the rewarded token in Redis (packages/local/test/tiered-denial-race).
    for (const sync of [{}, { sync: false as const }]) {
      const redis = await store();
      const tiered = new TieredLimiter({ ...common, store: redis, limits: FIVE, ...sync });
      kit.track(tiered);
      expect(await admitted(tiered, 'k', 1)).toBe(1);
      // Another instance spends the rest: this one holds no denial (with the sync, a lease that
      // emptied the bucket here would wait for the next sync, asking nothing).
      expect(await redis.apply({ key: 'k', limits: tiered.limits, take: 4 })).toMatchObject({ ok: true });
      const pending = tiered.consume('k');
      const done = tiered.reward('k', 1);
      expect(await pending).toMatchObject({ allowed: false, tier: 'global' });
      expect(await done).toBe(true);
      expect(await admitted(tiered, 'k', 2)).toBe(1);
    }
  });
});
