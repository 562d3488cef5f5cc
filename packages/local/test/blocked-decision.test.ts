import { defineLimit, type Limiter } from '@tiered-limiter/core';
import { LocalLimiter, MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';

const FIVE = defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'five' });

const open: Limiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

describe("a blocked key's decision has whole ms (DECISIONS: retryAfterMs and resetMs are whole ms, rounded up)", () => {
  it('on every limiter, at a fractional moment of the block', async () => {
    const clock = new FakeClock(1_000);
    const store = { store: new MemoryStore({ clock }), failurePolicy: 'closed' as const };
    const limiters: Limiter[] = [
      new LocalLimiter({ limits: FIVE, clock }),
      new RequestLimiter({ limits: FIVE, clock, ...store }),
      new TieredLimiter({ limits: FIVE, clock, ...store, sync: false }),
    ];
    open.push(...limiters);
    for (const limiter of limiters) limiter.block('k', 1_000);
    clock.advance(0.25);
    for (const limiter of limiters) {
      for (const decision of [await limiter.consume('k'), await limiter.peek('k')]) {
        expect(decision, limiter.constructor.name).toMatchObject({ allowed: false, retryAfterMs: 1_000 });
        // RequestLimiter and LocalLimiter said 999.75.
        expect(Number.isInteger(decision.resetMs), `${limiter.constructor.name} ${decision.resetMs}`).toBe(
          true,
        );
      }
    }
  });
});
