// Keys with several limits on a real Redis (packages/local/test/multi-limits.test.ts checks the same
// on a MemoryStore and fake time): a lease takes no more than the tightest limit has left, hand-backs
// reach every limit's key once, and setLimits between one limit and two sends each lease back to the
// keys it was taken from. Limits that refill one token per 1,000 s keep every count exact in real time.
import { defineLimit, type LimitSpec } from '@tiered-limiter/core';
import { TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import { RedisStore } from '@tiered-limiter/redis';
import { uniquePrefix } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { redisFileKit } from './src/redis-file-kit.js';

const SLOW = 0.001;
const A = defineLimit({ capacity: 100, refillPerSecond: SLOW, name: 'a' });
const B = defineLimit({ capacity: 10, refillPerSecond: SLOW, name: 'b' });

const kit = redisFileKit();

async function store() {
  return new RedisStore({ redis: await kit.redis(), prefix: uniquePrefix('multi') });
}

/** Whole tokens each of `limits` holds for `key`, one limit per peek, taking nothing. */
async function left(s: RedisStore, key: string, limits: readonly LimitSpec[]): Promise<number[]> {
  return Promise.all(limits.map(async (spec) => (await s.apply({ key, limits: [spec] })).remaining));
}

/** `left` once it equals `expected`, or what it is after 5 s: hand-backs are background calls. */
async function leftOnce(s: RedisStore, key: string, limits: readonly LimitSpec[], expected: number[]) {
  let seen = await left(s, key, limits);
  for (let i = 0; i < 500 && JSON.stringify(seen) !== JSON.stringify(expected); i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    seen = await left(s, key, limits);
  }
  return seen;
}

async function admitted(limiter: TieredLimiter, key: string, n: number): Promise<number> {
  let count = 0;
  for (let i = 0; i < n; i++) {
    const d = limiter.tryConsume(key) ?? (await limiter.consume(key));
    expect(d.tier).not.toBe('fallback');
    if (d.allowed) count++;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return count;
}

describe.each([
  ['sync: false', { sync: false as const, lease: { minBatch: 50 } }],
  ['the periodic sync', {}],
])('TieredLimiter with two limits on a real Redis, %s', (_, mode: Partial<TieredLimiterOptions>) => {
  function tiered(s: RedisStore, limits: readonly LimitSpec[], extra: Partial<TieredLimiterOptions> = {}) {
    const limiter = new TieredLimiter({
      store: s,
      limits,
      failurePolicy: 'closed',
      instances: 1,
      timeoutMs: 1_000,
      ...mode,
      ...extra,
    });
    kit.track(limiter);
    return limiter;
  }

  it('a lease takes no more than the hourly limit has left: 3, not 50', async () => {
    const s = await store();
    const burst = defineLimit({ capacity: 100, refillPerSecond: SLOW, name: 'burst' });
    const hourly = defineLimit({ capacity: 1_000, refillPerSecond: SLOW, name: 'hourly' });
    await s.apply({ key: 'k', limits: [hourly], take: 997 });
    const limiter = tiered(s, [burst, hourly]);
    expect(await admitted(limiter, 'k', 8)).toBe(3);
    await limiter.close();
    expect(await left(s, 'k', [burst, hourly])).toEqual([97, 0]);
  });

  it('hand-backs reach every limit once: eviction, block and close', async () => {
    const s = await store();
    const limiter = tiered(s, [A, B], { maxKeys: 1 });
    expect(await admitted(limiter, 'k', 3)).toBe(3);
    expect(await admitted(limiter, 'other', 1)).toBe(1);
    expect(await admitted(limiter, 'k', 2)).toBe(2);
    limiter.block('k', 100);
    expect(await leftOnce(s, 'k', [A, B], [95, 5])).toEqual([95, 5]);
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(await admitted(limiter, 'other', 2)).toBe(2);
    await limiter.close();
    expect(await left(s, 'k', [A, B])).toEqual([95, 5]);
    expect(await left(s, 'other', [A, B])).toEqual([97, 7]);
  });

  it('setLimits 1 → 2 → 1 with leases out: each lease goes back to the keys it was taken from', async () => {
    const s = await store();
    const limiter = tiered(s, [A]);
    expect(await admitted(limiter, 'k', 5)).toBe(5);
    limiter.setLimits([A, B]);
    expect(await leftOnce(s, 'k', [A, B], [95, 10])).toEqual([95, 10]);
    expect(await admitted(limiter, 'k', 12)).toBe(10);
    limiter.setLimits([A]);
    expect(await leftOnce(s, 'k', [A, B], [85, 0])).toEqual([85, 0]);
    expect(await admitted(limiter, 'k', 1)).toBe(1);
    await limiter.close();
    expect(await left(s, 'k', [A, B])).toEqual([84, 0]);
  });
});
