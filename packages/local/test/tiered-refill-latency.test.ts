import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';

describe('TieredLimiter stats().refillLatencyMs', () => {
  it('counts refills that answered, not the periodic sync’s hand-backs', async () => {
    const limiter = new TieredLimiter({
      store: new MemoryStore(),
      limits: defineLimit({ capacity: 50, refillPerSecond: 0.001 }),
      failurePolicy: 'open',
      instances: 1,
    });
    for (let i = 0; i < 3; i++) limiter.tryConsume('k') ?? (await limiter.consume('k'));
    // A few sync periods (20 ms each for one instance): each ends the key's grant and hands it back.
    await new Promise((resolve) => setTimeout(resolve, 400));
    const stats = limiter.stats();
    await limiter.close();
    expect(stats.refunds).toBeGreaterThan(0);
    // Every call to a MemoryStore answers: each refill sent is one sample, and nothing else is.
    expect(stats.refillLatencyMs.count).toBe(stats.refills);
  });
});
