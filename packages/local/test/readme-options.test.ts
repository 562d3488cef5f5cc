/**
 * Two promises of the root README's API tables no other test held: the `lease` row's "`ttlMs`,
 * `lowWater` with `sync: false` only" (a lease with the periodic sync lives one sync period, so a
 * `ttlMs` there would be a setting with no effect: it is refused, naming it), and "`LocalLimiter`'s
 * promise-returning methods resolve at once" (code written against the `Limiter` contract may await
 * them on a hot path: no timer, no store, nothing between the call and its answer); and the default
 * `coldStart.spacingMs`, "the larger of the lease's lifetime and `N × credit ÷ rate`", each side of it;
 * and the `fallback` row's `maxKeys`: the local fallback is a `LocalLimiter`, whose keys past it are
 * forgotten least recently used first and come back full.
 */
import { ConfigError, defineLimit, type GlobalStore, perSecond } from '@tiered-limiter/core';
import { LocalLimiter, MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';

describe('lease.ttlMs is for sync: false only', () => {
  it('is refused with the periodic sync, naming lease.ttlMs, and taken with sync: false', async () => {
    const clock = new FakeClock(0);
    const make = (sync: false | undefined) =>
      new TieredLimiter({
        store: new MemoryStore({ clock }),
        limits: perSecond(10),
        failurePolicy: 'open',
        clock,
        lease: { ttlMs: 2000 },
        ...(sync === false ? { sync } : {}),
      });
    let refused: unknown;
    try {
      make(undefined);
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).option).toBe('lease.ttlMs');
    await make(false).close();
  });
});

describe("LocalLimiter's promise-returning methods", () => {
  it('are settled before anything queued after the call runs: consume, peek, reset, reward, penalty, close', async () => {
    const limiter = new LocalLimiter({ limits: perSecond(10), clock: new FakeClock(0) });
    const calls: [string, () => Promise<unknown>][] = [
      ['consume', () => limiter.consume('k')],
      ['peek', () => limiter.peek('k')],
      ['reward', () => limiter.reward('k', 1)],
      ['penalty', () => limiter.penalty('k', 1)],
      ['reset', () => limiter.reset('k')],
      ['close', () => limiter.close()],
    ];
    for (const [name, call] of calls) {
      const settled: string[] = [];
      const promise = call();
      void promise.then(() => settled.push(name));
      // One turn of the microtask queue: an already-settled promise has run its reaction by then.
      await Promise.resolve();
      expect(settled).toEqual([name]);
    }
  });
});

describe('coldStart.spacingMs by default', () => {
  // Without the sync an instance gives credit from a spacing after it was made: the first new key
  // admitted on credit (tier `local`, from tryConsume) says when the spacing ended.
  it.each([
    ['N × credit ÷ rate (4 × 1 ÷ 4/s = 1,000 ms) over a 500 ms lease', 500, 1_000],
    ['the lease lifetime (3,000 ms) over N × credit ÷ rate (1,000 ms)', 3_000, 3_000],
  ])('is %s', async (_, ttlMs, spacingMs) => {
    const clock = new FakeClock(0);
    const limiter = new TieredLimiter({
      store: new MemoryStore({ clock }),
      limits: defineLimit({ capacity: 40, refillPerSecond: 4, name: 'api' }),
      failurePolicy: 'open',
      clock,
      sync: false,
      lease: { ttlMs },
      instances: 4,
      coldStart: { mode: 'optimistic' },
    });
    clock.advance(spacingMs - 1);
    expect(limiter.tryConsume('early')).toBeUndefined();
    clock.advance(1);
    expect(limiter.tryConsume('on-time')).toMatchObject({ allowed: true, tier: 'local' });
    await limiter.close();
  });
});

describe('fallback.maxKeys', () => {
  it("bounds the local fallback's keys: past it the least recently used is forgotten and comes back full", async () => {
    const down: GlobalStore = {
      apply: () => Promise.reject(new Error('down')),
      reset: () => Promise.reject(new Error('down')),
    };
    const limiter = new RequestLimiter({
      store: down,
      limits: perSecond(10),
      failurePolicy: 'local',
      // One token a key, back in 1,000 s: a key admitted twice was forgotten in between.
      fallback: { limits: defineLimit({ capacity: 1, refillPerSecond: 0.001, name: 'fb' }), maxKeys: 2 },
      breaker: false,
      clock: new FakeClock(0),
    });
    const allowed = async (key: string) => (await limiter.consume(key)).allowed;
    expect([await allowed('a'), await allowed('b'), await allowed('a')]).toEqual([true, true, false]);
    // A third key forgets the least recently used, `b`: `a` is still spent, `b` comes back full.
    expect(await allowed('c')).toBe(true);
    expect([await allowed('a'), await allowed('b')]).toEqual([false, true]);
    await limiter.close();
  });
});
