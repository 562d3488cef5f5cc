import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';

/** Lets background refills and hand-backs (promise chains through p-limit) finish. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** 6 tokens at 2 a second: one token every 500 ms. */
const SIX = defineLimit({ capacity: 6, refillPerSecond: 2, name: 'six' });

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

describe('a denial of a cost above 1 and the smaller costs after it', () => {
  it('a cost of 1 passes once one token is back, on both limiters, though a cost of 2 was turned away', async () => {
    const clock = new FakeClock(1_000);
    const common = { limits: SIX, failurePolicy: 'closed' as const, clock, timeoutMs: 10_000 };
    const request = new RequestLimiter({ ...common, store: new MemoryStore({ clock }) });
    const tiered = new TieredLimiter({ ...common, store: new MemoryStore({ clock }), sync: false });
    open.push(request, tiered);
    const decide = async (limiter: RequestLimiter | TieredLimiter, cost: number) => {
      const fast = limiter instanceof TieredLimiter ? limiter.tryConsume('k', cost) : undefined;
      const decision = fast ?? (await limiter.consume('k', cost));
      await settle();
      return decision.allowed;
    };
    for (const limiter of [request, tiered]) {
      // The fuzz's counterexample: 1, 2, 1, 2 empty the bucket; a cost of 2 is turned away.
      for (const cost of [1, 2, 1, 2]) expect(await decide(limiter, cost)).toBe(true);
      expect(await decide(limiter, 2)).toBe(false);
    }
    clock.advance(500);
    // One token is back: a cost of 1 passes, and the next waits again.
    expect(await decide(request, 1)).toBe(true);
    expect(await decide(tiered, 1)).toBe(true);
    expect(await decide(request, 1)).toBe(false);
    expect(await decide(tiered, 1)).toBe(false);
  });
});
