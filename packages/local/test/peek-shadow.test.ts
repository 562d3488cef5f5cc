import { defineLimit, type GlobalStore, type Limiter } from '@tiered-limiter/core';
import { LocalLimiter, MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';

/** 5 tokens, one per 1,000 s: nothing refills during a test. */
const FIVE = defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'five' });

const open: Limiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

function limiters(clock: FakeClock): [string, Limiter][] {
  const common = { limits: FIVE, clock, shadow: true };
  const store = { store: new MemoryStore({ clock }), failurePolicy: 'closed' as const };
  const made: [string, Limiter][] = [
    ['LocalLimiter', new LocalLimiter(common)],
    ['RequestLimiter', new RequestLimiter({ ...common, ...store })],
    ['TieredLimiter', new TieredLimiter({ ...common, ...store, sync: false })],
  ];
  open.push(...made.map(([, l]) => l));
  return made;
}

describe('peek in shadow mode says what a request would get: admitted, shadowDenied', () => {
  it('on a key past its limit, and on a blocked key, alike on every limiter', async () => {
    for (const [name, limiter] of limiters(new FakeClock(1_000))) {
      for (let i = 0; i < 6; i++) await limiter.consume('k');
      const peeked = await limiter.peek('k');
      const decided = await limiter.consume('k');
      expect(decided, name).toMatchObject({ allowed: true, shadowDenied: true });
      expect(peeked, name).toMatchObject({ allowed: true, shadowDenied: true, retryAfterMs: 0 });
      limiter.block('b', 1_000);
      expect(await limiter.peek('b'), name).toMatchObject({ allowed: true, shadowDenied: true });
      expect(await limiter.consume('b'), name).toMatchObject({ allowed: true, shadowDenied: true });
    }
  });
});

describe('shadow mode while the store is away: the failure policy is watched too, never enforced', () => {
  it("a 'closed' outage admits every request, marked shadowDenied, with the policy that would have denied", async () => {
    const clock = new FakeClock(1_000);
    const down = () => Promise.reject(new Error('store down'));
    const refusing: GlobalStore = { apply: down, reset: down };
    const common = { limits: FIVE, clock, shadow: true, failurePolicy: 'closed' as const };
    const made: [string, Limiter][] = [
      ['RequestLimiter', new RequestLimiter({ ...common, store: refusing })],
      ['TieredLimiter', new TieredLimiter({ ...common, store: refusing, sync: false })],
    ];
    open.push(...made.map(([, l]) => l));
    for (const [name, limiter] of made) {
      for (let i = 0; i < 3; i++) {
        expect(await limiter.consume('k'), name).toMatchObject({
          allowed: true,
          shadowDenied: true,
          tier: 'fallback',
          policy: 'closed',
        });
      }
    }
  });
});
