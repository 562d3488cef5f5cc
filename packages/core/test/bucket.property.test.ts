import { defineLimit, internal, type LimitSpec } from '@tiered-limiter/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const { covers, fullBucket, msUntilFull, msUntilTokens, refilled, tryTake, wholeTokens } = internal;
type BucketState = internal.BucketState;

/**
 * Limits across the whole accepted range, weighted toward small buckets (where a rounding slip
 * is a whole token) and the extremes (where sums get large).
 */
const limitArb: fc.Arbitrary<LimitSpec> = fc
  .record({
    capacity: fc.oneof(
      fc.integer({ min: 1, max: 10 }),
      fc.integer({ min: 1, max: 1_000_000_000 }),
      fc.constantFrom(1, 1_000_000_000),
    ),
    refillPerSecond: fc.oneof(
      fc.integer({ min: 1, max: 1000 }).map((n) => n / 60),
      fc.double({ min: 0.01, max: 1e9, noNaN: true }),
      // 1e9 - 0.001 per second: the quotient lands a hair above a whole ms, where rounding bites.
      fc.constantFrom(0.01, 1, 1e9, 999_999_999.999),
    ),
  })
  .map((o) => defineLimit(o));

/**
 * One request: how long after the previous one it comes (whole ms), its cost as a share of the
 * capacity, and whether, after a denial, it instead comes back 1 ms before the wait it was given
 * with the same cost: that puts the bucket a hair short, where the slack decides.
 */
const stepArb = fc.record({
  advanceMs: fc.oneof(
    fc.constant(0),
    fc.integer({ min: 0, max: 50 }),
    fc.integer({ min: 0, max: 5_000_000 }),
  ),
  costShare: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 1, noNaN: true })),
  early: fc.boolean(),
});

type Step = { advanceMs: number; costShare: number; early: boolean };

function costOf(step: Step, spec: LimitSpec): number {
  return Math.min(spec.capacity, 1 + Math.floor(step.costShare * spec.capacity));
}

/**
 * A property of any limit's bucket, full at any start time `t0`, over any trace of up to
 * `maxSteps` steps.
 */
function traceProperty(
  maxSteps: number,
  check: (spec: LimitSpec, t0: number, steps: Step[], state: BucketState) => void,
) {
  return fc.property(
    limitArb,
    fc.integer({ min: 0, max: 1e9 }),
    fc.array(stepArb, { maxLength: maxSteps }),
    (spec, t0, steps) => check(spec, t0, steps, fullBucket(spec, t0)),
  );
}

/** Every window of the admitted trace holds at most the burst plus what refilled inside it. */
function expectWindowsBounded(admitted: readonly { atMs: number; cost: number }[], spec: LimitSpec): void {
  for (let i = 0; i < admitted.length; i++) {
    let sum = 0;
    for (let j = i; j < admitted.length; j++) {
      sum += admitted[j]!.cost;
      const windowMs = admitted[j]!.atMs - admitted[i]!.atMs;
      const bound = spec.capacity + windowMs * spec.refillPerMs;
      // The slack may admit each request a hair early; allow that and double rounding, no more.
      expect(sum).toBeLessThanOrEqual(bound + (j - i + 1) * 1e-9 + bound * 1e-12);
    }
  }
}

describe('token bucket math, any trace', () => {
  it('keeps tokens within [0, capacity], admits ⇔ no wait, and bounds every window', () => {
    fc.assert(
      traceProperty(60, (spec, t0, steps, state) => {
        const admitted: { atMs: number; cost: number }[] = [];
        let now = t0;
        let denied: { cost: number; wait: number } | undefined;
        for (const step of steps) {
          const early = step.early && denied !== undefined && denied.wait > 1 ? denied : undefined;
          now += early ? early.wait - 1 : step.advanceMs;
          const cost = early ? early.cost : costOf(step, spec);
          const wait = msUntilTokens(refilled(state.tokens, now - state.updatedAtMs, spec), cost, spec);
          const ok = tryTake(state, spec, cost, now);
          denied = ok ? undefined : { cost, wait };
          expect(ok).toBe(wait === 0);
          expect(state.tokens).toBeGreaterThanOrEqual(0);
          expect(state.tokens).toBeLessThanOrEqual(spec.capacity);
          expect(wholeTokens(state.tokens)).toBeGreaterThanOrEqual(0);
          expect(Number.isInteger(msUntilFull(state.tokens, spec))).toBe(true);
          if (ok) admitted.push({ atMs: now, cost });
          else expect(wait).toBeGreaterThan(0);
        }
        expectWindowsBounded(admitted, spec);
      }),
      { numRuns: 400 },
    );
  });

  it('admits a denied request retried after exactly its wait, with no other traffic', () => {
    fc.assert(
      traceProperty(40, (spec, t0, steps, state) => {
        let now = t0;
        for (const step of steps) {
          now += step.advanceMs;
          const cost = costOf(step, spec);
          if (tryTake(state, spec, cost, now)) continue;
          const wait = msUntilTokens(state.tokens, cost, spec);
          expect(Number.isInteger(wait)).toBe(true);
          expect(wait).toBeGreaterThanOrEqual(1);
          expect(wait).toBeLessThanOrEqual(Math.ceil((cost - state.tokens) / spec.refillPerMs) + 1);
          const retry: BucketState = { ...state };
          expect(tryTake(retry, spec, cost, now + wait)).toBe(true);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('fills the bucket after exactly msUntilFull, a wait at most 1 ms above the exact one', () => {
    fc.assert(
      fc.property(limitArb, fc.double({ min: 0, max: 1, noNaN: true }), (spec, share) => {
        const tokens = share * spec.capacity;
        const ms = msUntilFull(tokens, spec);
        expect(Number.isInteger(ms)).toBe(true);
        expect(covers(refilled(tokens, ms, spec), spec.capacity)).toBe(true);
        // Rounding at a billion tokens can make the wait 1 ms longer than exact math, never more.
        expect(ms).toBeLessThanOrEqual(Math.ceil((spec.capacity - tokens) / spec.refillPerMs) + 1);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('token bucket math, small exhaustive cases', () => {
  // Rates of 250, 500, 1000 and 2000 per second add 1/4, 1/2, 1 or 2 tokens per ms: exact in binary,
  // so the float math must agree exactly with a model counting quarter tokens in integers.
  const RATES = [250, 500, 1000, 2000];
  const ADVANCES = [0, 1, 2, 3];
  const STEPS = 4;

  it('agrees with an integer model on every trace of 4 requests, capacities 1 to 3', () => {
    // Plain comparisons, one expect at the end: 400,000 traces make expect() itself the cost.
    const mismatches: string[] = [];
    let traces = 0;
    for (const capacity of [1, 2, 3]) {
      for (const rate of RATES) {
        const spec = defineLimit({ capacity, refillPerSecond: rate });
        const quartersPerMs = rate / 250;
        const choices: [number, number][] = [];
        for (const advanceMs of ADVANCES)
          for (let cost = 1; cost <= capacity; cost++) choices.push([advanceMs, cost]);
        const total = choices.length ** STEPS;
        for (let n = 0; n < total && mismatches.length < 5; n++) {
          const state = fullBucket(spec, 0);
          let quarters = capacity * 4;
          let now = 0;
          for (let k = 0, rest = n; k < STEPS; k++, rest = Math.floor(rest / choices.length)) {
            const [advanceMs, cost] = choices[rest % choices.length]!;
            now += advanceMs;
            quarters = Math.min(capacity * 4, quarters + advanceMs * quartersPerMs);
            const modelOk = quarters >= cost * 4;
            if (modelOk) quarters -= cost * 4;
            const ok = tryTake(state, spec, cost, now);
            const got = [ok, state.tokens, wholeTokens(state.tokens), msUntilFull(state.tokens, spec)];
            const want = [
              modelOk,
              quarters / 4,
              Math.floor(quarters / 4),
              Math.ceil((capacity * 4 - quarters) / quartersPerMs),
            ];
            if (!ok) {
              got.push(msUntilTokens(state.tokens, cost, spec));
              want.push(Math.ceil((cost * 4 - quarters) / quartersPerMs));
            }
            if (got.join() !== want.join()) {
              mismatches.push(
                `capacity ${capacity}, ${rate}/s, trace #${n}, step ${k}: got ${got}, want ${want}`,
              );
              break;
            }
          }
          traces++;
        }
      }
    }
    expect(mismatches).toEqual([]);
    expect(traces).toBe(4 * (4 ** 4 + 8 ** 4 + 12 ** 4));
  });
});
