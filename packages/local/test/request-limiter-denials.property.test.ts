import { type Decision, defineLimit, type LimitSpec } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

/**
 * One or two small buckets. A name keeps its rate: under a new rate a store refills the time since
 * a key's last op at the new one, so the op a request turned away in process saves would change
 * what the next one finds (the store's way, not the memory's). Capacities change freely.
 */
const RATES = { a: 0.5, b: 10, c: 1000 / 3 } as const;
const limitsArb: fc.Arbitrary<LimitSpec[]> = fc
  .uniqueArray(fc.constantFrom('a', 'b', 'c'), { minLength: 1, maxLength: 2 })
  .chain((names) =>
    fc.tuple(...names.map((name) => fc.integer({ min: 1, max: 4 }).map((capacity) => ({ name, capacity })))),
  )
  .map((list) =>
    list.map(({ name, capacity }) => defineLimit({ name, capacity, refillPerSecond: RATES[name] })),
  );

type Call =
  | { readonly t: 'consume'; readonly key: number; readonly cost: number }
  | { readonly t: 'reset' | 'peek'; readonly key: number }
  | { readonly t: 'reward' | 'penalty'; readonly key: number; readonly tokens: number }
  | { readonly t: 'setLimits'; readonly limits: LimitSpec[] };

const keyArb = fc.integer({ min: 0, max: 1 });
const callArb: fc.Arbitrary<Call> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ t: fc.constant('consume' as const), key: keyArb, cost: fc.constantFrom(1, 1, 2) }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constantFrom('reset' as const, 'peek' as const), key: keyArb }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constantFrom('reward' as const, 'penalty' as const),
      key: keyArb,
      tokens: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('setLimits' as const), limits: limitsArb }) },
);

/** Calls made together, in one tick, so that each may be in flight while the others are made; then a wait. */
const stepArb = fc.record({
  calls: fc.array(callArb, { minLength: 1, maxLength: 3 }),
  advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3000 })),
});

function call(limiter: RequestLimiter, c: Call): Promise<unknown> {
  switch (c.t) {
    case 'consume':
      return limiter.consume(`k${c.key}`, Math.min(c.cost, ...limiter.limits.map((spec) => spec.capacity)));
    case 'peek':
      return limiter.peek(`k${c.key}`);
    case 'reset':
      return limiter.reset(`k${c.key}`);
    case 'reward':
      return limiter.reward(`k${c.key}`, c.tokens);
    case 'penalty':
      return limiter.penalty(`k${c.key}`, c.tokens);
    case 'setLimits':
      limiter.setLimits(c.limits);
      return Promise.resolve();
  }
}

/** What a remembered denial must say as the store would: every field but the tier. */
function answer(result: unknown): unknown {
  if (typeof result !== 'object' || result === null) return result;
  const { tier: _tier, ...rest } = result as Decision;
  return rest;
}

describe('RequestLimiter.rememberDenials', () => {
  it('answers every call as the store alone would, whatever travels meanwhile', async () => {
    await fc.assert(
      fc.asyncProperty(limitsArb, fc.array(stepArb, { maxLength: 25 }), async (limits, steps) => {
        const clock = new FakeClock(1_000);
        const make = (rememberDenials: boolean) =>
          new RequestLimiter({
            store: new MemoryStore({ clock }),
            limits,
            failurePolicy: 'closed',
            clock,
            rememberDenials,
          });
        const remembering = make(true);
        const asking = make(false);
        for (const { calls, advanceMs } of steps) {
          const kept = await Promise.all(calls.map((c) => call(remembering, c)));
          const asked = await Promise.all(calls.map((c) => call(asking, c)));
          expect(kept.map(answer)).toEqual(asked.map(answer));
          clock.advance(advanceMs);
        }
      }),
      { numRuns: 400 },
    );
  });
});
