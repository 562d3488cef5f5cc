import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { afterEach, describe, expect, it } from 'vitest';

const open: TieredLimiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

describe('acquire while setLimits lowers the capacity', () => {
  it('a waiter whose cost the new limits can never hold gives up (timeout), never rejects', async () => {
    const limiter = new TieredLimiter({
      store: new MemoryStore(),
      limits: defineLimit({ capacity: 5, refillPerSecond: 20, name: 'five' }),
      failurePolicy: 'closed',
      sync: false,
      timeoutMs: 1_000,
    });
    open.push(limiter);
    expect((await limiter.consume('k', 5)).allowed).toBe(true);
    // Five tokens at 20/s: a 250 ms wait, within maxWaitMs; its retry meets the new limits.
    const waiting = limiter.acquire('k', 5, { maxWaitMs: 2_000 });
    const behind = limiter.acquire('k', 1, { maxWaitMs: 2_000 });
    await new Promise<void>((resolve) => setImmediate(resolve));
    limiter.setLimits(defineLimit({ capacity: 3, refillPerSecond: 20, name: 'five' }));
    const result = await waiting.catch((error: unknown) => error);
    expect(result).toMatchObject({ acquired: false, reason: 'timeout' });
    // The line moves on: the next waiter gets its token.
    expect(await behind).toMatchObject({ acquired: true });
  });
});
