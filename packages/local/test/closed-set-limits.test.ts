import { ClosedError, defineLimit, type Limiter } from '@tiered-limiter/core';
import { LocalLimiter, MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';

const FIVE = defineLimit({ capacity: 5, refillPerSecond: 1, name: 'five' });

describe('setLimits on a closed limiter (README: later calls throw ClosedError)', () => {
  it('throws ClosedError on every limiter, as its other calls do', async () => {
    const store = { store: new MemoryStore(), failurePolicy: 'closed' as const };
    const limiters: Limiter[] = [
      new LocalLimiter({ limits: FIVE }),
      new RequestLimiter({ limits: FIVE, ...store }),
      new TieredLimiter({ limits: FIVE, ...store }),
    ];
    for (const limiter of limiters) {
      await limiter.close();
      expect(() => limiter.block('k', 1_000), limiter.constructor.name).toThrow(ClosedError);
      // It was accepted in silence, and the limits changed on a limiter that decides nothing.
      expect(
        () => limiter.setLimits(defineLimit({ capacity: 9, refillPerSecond: 1 })),
        limiter.constructor.name,
      ).toThrow(ClosedError);
      expect(limiter.limits).toEqual([FIVE]);
    }
  });
});
