import {
  allowDecision,
  type Decision,
  defineLimit,
  denyDecision,
  type LimitSpec,
  perSecond,
} from '@tiered-limiter/core';
import { LocalLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

/** 1 to 3 limits, named apart, weighted toward small buckets where a slip is a whole token. */
const limitsArb: fc.Arbitrary<LimitSpec[]> = fc
  .array(
    fc.record({
      capacity: fc.oneof(
        { weight: 3, arbitrary: fc.integer({ min: 1, max: 12 }) },
        { weight: 1, arbitrary: fc.integer({ min: 1, max: 1_000_000_000 }) },
      ),
      refillPerSecond: fc.oneof(
        fc.integer({ min: 1, max: 600 }).map((n) => n / 60),
        fc.double({ min: 0.01, max: 1e9, noNaN: true }),
        fc.constantFrom(1, 1000, 1e9, 999_999_999.999),
      ),
    }),
    { minLength: 1, maxLength: 3 },
  )
  .map((list) => list.map((o, i) => defineLimit({ ...o, name: `l${i}` })));

/** Requests over 13 keys, a few hundred ms apart at most. */
const keyedRequestsArb = fc.array(
  fc.record({ key: fc.integer({ min: 0, max: 12 }), advanceMs: fc.integer({ min: 0, max: 300 }) }),
  { maxLength: 80 },
);

interface Step {
  /** Time since the previous request. */
  advanceMs: number;
  /** The cost as a share of the smallest capacity (0 → 1 token). */
  costShare: number;
  /** When denied, come back after exactly `retryAfterMs` with the same request. */
  retry: boolean;
}

const wholeMsArb = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 0, max: 40 }),
  fc.integer({ min: 0, max: 3_000_000 }),
);
const fractionalMsArb = fc.oneof(wholeMsArb, fc.double({ min: 0, max: 5000, noNaN: true }));

function stepsArb(advanceMs: fc.Arbitrary<number>): fc.Arbitrary<Step[]> {
  return fc.array(
    fc.record({
      advanceMs,
      costShare: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 1, noNaN: true })),
      retry: fc.boolean(),
    }),
    { maxLength: 50 },
  );
}

function minCapacity(limits: readonly LimitSpec[]): number {
  return Math.min(...limits.map((spec) => spec.capacity));
}

function costOf(step: Step, limits: readonly LimitSpec[]): number {
  const max = minCapacity(limits);
  return Math.min(max, 1 + Math.floor(step.costShare * max));
}

/** What holds for every decision a LocalLimiter makes, alone. */
function expectWellFormed(d: Decision, limits: readonly LimitSpec[]): void {
  expect(d.tier).toBe('local');
  expect(d.policy).toBeUndefined();
  expect(d.error).toBeUndefined();
  expect(limits.map((spec) => spec.capacity)).toContain(d.limit);
  expect(Number.isInteger(d.remaining)).toBe(true);
  expect(d.remaining).toBeGreaterThanOrEqual(0);
  expect(d.remaining).toBeLessThanOrEqual(d.limit);
  expect(Number.isInteger(d.retryAfterMs)).toBe(true);
  expect(d.allowed).toBe(d.retryAfterMs === 0);
  if (!d.allowed) expect(d.retryAfterMs).toBeGreaterThan(0);
  expect(Number.isInteger(d.resetMs)).toBe(true);
  expect(d.resetMs).toBeGreaterThanOrEqual(0);
  expect(d.resetMs).toBeLessThanOrEqual(Math.max(...limits.map((spec) => Math.ceil(spec.fillMs) + 1)));
}

/** For every limit, every window of the admitted trace holds at most its burst plus its refill. */
function expectWindowsBounded(
  admitted: readonly { atMs: number; cost: number }[],
  limits: readonly LimitSpec[],
) {
  for (const spec of limits) {
    for (let i = 0; i < admitted.length; i++) {
      let sum = 0;
      for (let j = i; j < admitted.length; j++) {
        sum += admitted[j]!.cost;
        const bound = spec.capacity + (admitted[j]!.atMs - admitted[i]!.atMs) * spec.refillPerMs;
        // Each admission may come a TOKEN_EPSILON early; beyond that, only double rounding.
        if (sum > bound + (j - i + 1) * 1e-9 + bound * 1e-12) {
          expect.fail(`limit ${spec.name}: ${sum} tokens admitted in a window allowing ${bound}`);
        }
      }
    }
  }
}

/**
 * Replays `steps` on one key and checks every decision. A denied step with `retry` set comes back
 * after exactly its `retryAfterMs` (or 1 ms later with `retrySlackMs: 1`) and must be admitted.
 */
async function runTrace(limits: LimitSpec[], steps: Step[], startMs: number, retrySlackMs = 0) {
  const clock = new FakeClock(startMs);
  // A small maxKeys: lru-cache preallocates, and the default 100,000 costs ~7 ms a construction.
  const limiter = new LocalLimiter({ limits, clock, maxKeys: 4 });
  const admitted: { atMs: number; cost: number }[] = [];
  const take = async (cost: number): Promise<Decision> => {
    const d = limiter.tryConsume('k', cost);
    expectWellFormed(d, limits);
    // A peek asks for one token; a denial of more speaks of the limit that keeps that cost waiting
    // longest, which may be another (core's isTighter): compare only where both ask the same.
    if (d.allowed || cost === 1) {
      const peeked = await limiter.peek('k');
      expect([peeked.remaining, peeked.limit, peeked.resetMs]).toEqual([d.remaining, d.limit, d.resetMs]);
    }
    if (d.allowed) admitted.push({ atMs: clock.now(), cost });
    return d;
  };
  for (const step of steps) {
    clock.advance(step.advanceMs);
    const cost = costOf(step, limits);
    const d = await take(cost);
    if (!d.allowed && step.retry) {
      clock.advance(d.retryAfterMs + retrySlackMs);
      expect((await take(cost)).allowed).toBe(true);
    }
  }
  expectWindowsBounded(admitted, limits);
  return { clock, limiter };
}

describe('LocalLimiter, any trace', () => {
  it('decides consistently, admits retries after exactly retryAfterMs, and bounds every window', async () => {
    await fc.assert(
      fc.asyncProperty(
        limitsArb,
        stepsArb(wholeMsArb),
        fc.integer({ min: 0, max: 1e9 }),
        async (limits, steps, start) => {
          await runTrace(limits, steps, start);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps the same invariants on a clock with fractional milliseconds', async () => {
    // `now + retryAfterMs` rounds when `now` is fractional, and at a billion tokens per second a
    // rounding of 1e-10 ms is 1e-4 tokens, more than the slack: the retry is checked 1 ms later.
    await fc.assert(
      fc.asyncProperty(
        limitsArb,
        stepsArb(fractionalMsArb),
        fc.double({ min: 0, max: 1e8, noNaN: true }),
        async (limits, steps, start) => {
          await runTrace(limits, steps, start, 1);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('forgets every key once every bucket has had time to refill', async () => {
    await fc.assert(
      fc.asyncProperty(limitsArb, stepsArb(wholeMsArb), async (limits, steps) => {
        const { clock, limiter } = await runTrace(limits, steps, 0);
        expect(limiter.size).toBeLessThanOrEqual(1);
        clock.advance(Math.max(...limits.map((spec) => Math.ceil(spec.fillMs))) + 1);
        expect(limiter.size).toBe(0);
      }),
      { numRuns: 100 },
    );
  });

  it('in shadow mode admits all and otherwise decides exactly as when enforcing', () => {
    fc.assert(
      fc.property(limitsArb, stepsArb(wholeMsArb), (limits, steps) => {
        const clock = new FakeClock(0);
        const enforcing = new LocalLimiter({ limits, clock, maxKeys: 4 });
        const shadow = new LocalLimiter({ limits, clock, maxKeys: 4, shadow: true });
        for (const step of steps) {
          clock.advance(step.advanceMs);
          const cost = costOf(step, limits);
          const real = enforcing.tryConsume('k', cost);
          const seen = shadow.tryConsume('k', cost);
          expect(seen).toEqual({ ...real, allowed: true, retryAfterMs: 0, shadowDenied: !real.allowed });
        }
      }),
      { numRuns: 200 },
    );
  });

  it('forgets exactly the least recently used key past maxKeys, and never holds more', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 6 }), keyedRequestsArb, async (maxKeys, requests) => {
        const clock = new FakeClock(0);
        const spec = defineLimit({ capacity: 3, refillPerSecond: 2 });
        const bounded = new LocalLimiter({ limits: spec, clock, maxKeys });
        // The model: an unbounded limiter, told to forget whichever key an LRU list of maxKeys drops.
        const model = new LocalLimiter({ limits: spec, clock, maxKeys: 100 });
        const lru: number[] = []; // most recent last
        for (const { key, advanceMs } of requests) {
          clock.advance(advanceMs);
          if (lru.includes(key)) lru.splice(lru.indexOf(key), 1);
          else if (lru.length === maxKeys) model.reset(`k${lru.shift()}`);
          lru.push(key);
          expect(bounded.tryConsume(`k${key}`)).toEqual(model.tryConsume(`k${key}`));
        }
        for (let key = 0; key <= 12; key++) {
          expect(await bounded.peek(`k${key}`)).toEqual(await model.peek(`k${key}`));
        }
        expect(bounded.size).toBeLessThanOrEqual(maxKeys);
      }),
      { numRuns: 300 },
    );
  });

  it('never holds more than maxKeys keys while counting drops full buckets on the way', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), keyedRequestsArb, (maxKeys, requests) => {
        const clock = new FakeClock(0);
        const limiter = new LocalLimiter({ limits: perSecond(3), clock, maxKeys });
        for (const { key, advanceMs } of requests) {
          clock.advance(advanceMs);
          limiter.tryConsume(`k${key}`);
          expect(limiter.size).toBeLessThanOrEqual(maxKeys);
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe('LocalLimiter, small exhaustive cases', () => {
  // Rates of 250, 500, 1000 and 2000 per second add 1/4, 1/2, 1 or 2 tokens per ms: exact in
  // binary, so every decision must equal the one a model counting quarter tokens in integers makes.
  const ADVANCES = [0, 1, 2, 3];

  function modelDecision(quarters: number[], limits: LimitSpec[], cost: number, allowed: boolean): Decision {
    // One limit speaks for the decision (core's isTighter): the longest wait (the request's own
    // when denied, the next token's when admitted), then the fewest whole tokens, then the
    // longest time until full, then the first listed.
    let at = 0;
    let best: [number, number, number] = [0, 0, 0];
    limits.forEach((spec, i) => {
      const q = quarters[i]!;
      const perMs = spec.refillPerSecond / 250;
      const wait = Math.ceil(Math.max(0, (allowed ? 1 : cost) * 4 - q) / perMs);
      const whole = Math.floor(q / 4);
      const full = Math.ceil((spec.capacity * 4 - q) / perMs);
      const tighter =
        i === 0 ||
        wait > best[0] ||
        (wait === best[0] && (whole < best[1] || (whole === best[1] && full > best[2])));
      if (tighter) {
        at = i;
        best = [wait, whole, full];
      }
    });
    const spec = limits[at]!;
    return allowed
      ? allowDecision(best[1], best[2], spec, 'local')
      : denyDecision(best[0], best[1], best[2], spec, 'local');
  }

  /** Runs every trace of `steps` requests and returns how many it checked, or the first mismatch. */
  function exhaust(limits: LimitSpec[], steps: number): number | string {
    const maxCost = minCapacity(limits);
    const choices: [number, number][] = [];
    for (const advanceMs of ADVANCES)
      for (let cost = 1; cost <= maxCost; cost++) choices.push([advanceMs, cost]);
    const total = choices.length ** steps;
    for (let n = 0; n < total; n++) {
      const clock = new FakeClock(0);
      const limiter = new LocalLimiter({ limits, clock, maxKeys: 1 });
      const quarters = limits.map((spec) => spec.capacity * 4);
      for (let k = 0, rest = n; k < steps; k++, rest = Math.floor(rest / choices.length)) {
        const [advanceMs, cost] = choices[rest % choices.length]!;
        clock.advance(advanceMs);
        limits.forEach((spec, i) => {
          quarters[i] = Math.min(spec.capacity * 4, quarters[i]! + (advanceMs * spec.refillPerSecond) / 250);
        });
        const allowed = quarters.every((q) => q >= cost * 4);
        if (allowed) for (let i = 0; i < quarters.length; i++) quarters[i]! -= cost * 4;
        const want = modelDecision(quarters, limits, cost, allowed);
        const got = limiter.tryConsume('k', cost);
        if (JSON.stringify(got) !== JSON.stringify(want)) {
          return `trace #${n} step ${k} (${advanceMs} ms, cost ${cost}): got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`;
        }
      }
    }
    return total;
  }

  it('one limit: capacities 1 to 3, four rates, every trace of 4 requests', () => {
    let traces = 0;
    for (const capacity of [1, 2, 3]) {
      for (const rate of [250, 500, 1000, 2000]) {
        const result = exhaust([defineLimit({ capacity, refillPerSecond: rate })], 4);
        expect(result).toBeTypeOf('number');
        traces += result as number;
      }
    }
    expect(traces).toBe(4 * (4 ** 4 + 8 ** 4 + 12 ** 4));
  });

  it('two limits: every pairing of capacities 1 to 3 and rates, every trace of 3 requests', () => {
    let traces = 0;
    for (const [c1, c2] of [
      [1, 2],
      [2, 1],
      [2, 3],
      [3, 2],
      [3, 3],
    ] as const) {
      for (const [r1, r2] of [
        [250, 2000],
        [2000, 250],
        [500, 1000],
      ] as const) {
        const limits = [
          defineLimit({ capacity: c1, refillPerSecond: r1, name: 'a' }),
          defineLimit({ capacity: c2, refillPerSecond: r2, name: 'b' }),
        ];
        const result = exhaust(limits, 3);
        expect(result).toBeTypeOf('number');
        traces += result as number;
      }
    }
    expect(traces).toBe(3 * (4 ** 3 * 2 + 8 ** 3 * 2 + 12 ** 3));
  });
});
