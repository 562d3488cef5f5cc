import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';

const LIMIT = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'api' });

const open: TieredLimiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

describe('TieredLimiter stats().decisions', () => {
  it('counts every decision under one tier: blocked keys and optimistic admissions are `local`', async () => {
    const clock = new FakeClock(0);
    const limiter = new TieredLimiter({
      store: new MemoryStore({ clock }),
      limits: LIMIT,
      failurePolicy: 'open',
      clock,
      sync: false,
      instances: 1,
      coldStart: { mode: 'optimistic' },
    });
    open.push(limiter);
    // Optimistic credit starts a spacing (here 1 s: N·credit ÷ rate) after the limiter was made.
    clock.advance(2_000);
    const optimistic = limiter.tryConsume('new');
    expect(optimistic).toMatchObject({ allowed: true, tier: 'local' });
    limiter.block('blocked', 60_000);
    const blocked = limiter.tryConsume('blocked') ?? (await limiter.consume('blocked'));
    expect(blocked).toMatchObject({ allowed: false, tier: 'local' });

    const stats = limiter.stats();
    expect(stats.allowed + stats.denied).toBe(2);
    expect(stats.decisions).toEqual({ lease: 0, global: 0, fallback: 0, local: 2 });
    const byTier = Object.values(stats.decisions).reduce((a, b) => a + b, 0);
    expect(byTier).toBe(stats.allowed + stats.denied);
  });
});
