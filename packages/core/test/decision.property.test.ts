import {
  allowDecision,
  type Decision,
  type DecisionTier,
  defineLimit,
  denyDecision,
  type FailurePolicy,
  internal,
  shadowOf,
} from '@tiered-limiter/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const { denyDecisionLike } = internal;

// Small domains, so that the previous decision often holds the very values asked for.
const specs = [
  defineLimit({ name: 'a', capacity: 5, refillPerSecond: 1 }),
  defineLimit({ name: 'b', capacity: 5, refillPerSecond: 1 }),
  defineLimit({ name: 'a', capacity: 6, refillPerSecond: 1 }),
];
const ms = fc.oneof(fc.integer({ min: -2, max: 4 }), fc.constantFrom(0.25, 1.5, 2.999, 3.0001));
const tier = fc.constantFrom<DecisionTier>('local', 'lease', 'global', 'fallback');
const args = fc.record({
  retryAfterMs: ms,
  remaining: ms,
  resetMs: ms,
  spec: fc.constantFrom(...specs),
  tier,
});
type Args = typeof args extends fc.Arbitrary<infer T> ? T : never;

const deny = (a: Args) => denyDecision(a.retryAfterMs, a.remaining, a.resetMs, a.spec, a.tier);
/** A decision made before, for the same arguments as the one asked for or for others. */
const previous = (asked: Args): fc.Arbitrary<Decision | undefined> =>
  fc.oneof(
    fc.constant(undefined),
    fc.constant(deny(asked)),
    args.map(deny),
    args.map((a) => shadowOf(deny(a))),
    args.map((a) => allowDecision(a.remaining, a.resetMs, a.spec, a.tier)),
    fc
      .tuple(args, fc.constantFrom<FailurePolicy>('open', 'closed', 'local'))
      .map(([a, policy]) => denyDecision(a.retryAfterMs, a.remaining, a.resetMs, a.spec, a.tier, policy)),
  );

describe('denyDecisionLike', () => {
  it('answers what denyDecision answers, and hands back the previous decision exactly when it holds those values', () => {
    fc.assert(
      fc.property(
        args.chain((a) => fc.tuple(fc.constant(a), previous(a))),
        ([a, prior]) => {
          const fresh = deny(a);
          const answer = denyDecisionLike(prior, a.retryAfterMs, a.remaining, a.resetMs, a.spec, a.tier);
          expect(answer).toStrictEqual(fresh);
          const same =
            prior !== undefined &&
            Object.keys(fresh).every((k) =>
              Object.is(prior[k as keyof Decision], fresh[k as keyof Decision]),
            );
          expect(answer === prior).toBe(same);
        },
      ),
      { numRuns: 2_000 },
    );
  });
});
