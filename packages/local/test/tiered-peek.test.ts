import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';

/** Lets background refills and hand-backs (promise chains through p-limit) finish. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

const open: TieredLimiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

describe('TieredLimiter.peek says what a request of cost 1 would get', () => {
  it('with the periodic sync, where a take or a lease may borrow a period of refill', async () => {
    const clock = new FakeClock(1_000);
    // 200 declared instances: a sync period of 1.1 s, 11 tokens of refill a take may borrow at 10/s.
    const limiter = new TieredLimiter({
      store: new MemoryStore({ clock }),
      limits: defineLimit({ capacity: 5, refillPerSecond: 10, name: 'ten' }),
      failurePolicy: 'closed',
      clock,
      instances: 200,
      timeoutMs: 1_000,
    });
    open.push(limiter);
    const seen: string[] = [];
    for (let i = 0; i < 12; i++) {
      const peeked = await limiter.peek('k');
      const decided = limiter.tryConsume('k') ?? (await limiter.consume('k'));
      await settle();
      seen.push(`peek ${peeked.allowed} / request ${decided.allowed}`);
    }
    // Before: 7 of the 12 peeks said denied (retry in 100 ms) where the request was admitted.
    expect(seen.filter((s) => s === 'peek false / request true')).toEqual([]);
  });
});

describe('TieredLimiter never says more remains than the limit holds', () => {
  it('when the bucket forgot the lease it holds (its key reset from elsewhere, or evicted by Redis)', async () => {
    const clock = new FakeClock(1_000);
    const store = new MemoryStore({ clock });
    const limit = defineLimit({ capacity: 40, refillPerSecond: 0.001, name: 'slow' });
    const limiter = new TieredLimiter({
      store,
      limits: limit,
      failurePolicy: 'closed',
      clock,
      timeoutMs: 1_000,
    });
    open.push(limiter);
    for (let i = 0; i < 3; i++) {
      expect((limiter.tryConsume('k') ?? (await limiter.consume('k'))).allowed).toBe(true);
      await settle();
    }
    expect(limiter.stats().tokensHeld).toBeGreaterThan(0);
    // The store's bucket is full again, the lease forgotten; the limiter still holds its tokens.
    await store.reset('k', [limit]);
    const peeked = await limiter.peek('k');
    const decided = limiter.tryConsume('k') ?? (await limiter.consume('k'));
    // Before: the peek said 40 + the lease's tokens of a limit of 40.
    expect(peeked.remaining).toBeLessThanOrEqual(limit.capacity);
    expect(decided.remaining).toBeLessThanOrEqual(limit.capacity);
  });
});
