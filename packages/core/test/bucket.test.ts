import { defineLimit, internal, perHour, perMinute, perSecond } from '@tiered-limiter/core';
import { describe, expect, it } from 'vitest';

const {
  advance,
  covers,
  fullBucket,
  isFullAt,
  msUntilFull,
  msUntilTokens,
  refilled,
  TOKEN_EPSILON,
  tryTake,
  wholeTokens,
} = internal;
type BucketState = internal.BucketState;

const tenPerSecond = perSecond(10); // 0.01 token per ms: one token every 100 ms

describe('refilled', () => {
  it('adds elapsed × rate and stops at the capacity', () => {
    expect(refilled(0, 500, tenPerSecond)).toBe(5);
    expect(refilled(4, 250, tenPerSecond)).toBe(6.5);
    expect(refilled(9, 100, tenPerSecond)).toBe(10);
    expect(refilled(9, 1e12, tenPerSecond)).toBe(10);
  });

  it('adds nothing for no time, negative time (a clock stepping back) or NaN', () => {
    expect(refilled(3, 0, tenPerSecond)).toBe(3);
    expect(refilled(3, -500, tenPerSecond)).toBe(3);
    expect(refilled(3, Number.NaN, tenPerSecond)).toBe(3);
  });
});

describe('covers and wholeTokens', () => {
  it('allows TOKEN_EPSILON of slack and no more', () => {
    expect(TOKEN_EPSILON).toBe(1e-9);
    expect(covers(1, 1)).toBe(true);
    expect(covers(1 - 1e-10, 1)).toBe(true);
    expect(covers(1 - 1e-9, 1)).toBe(true);
    expect(covers(1 - 1e-8, 1)).toBe(false);
    expect(covers(0.1 + 0.2, 0.3)).toBe(true);
  });

  it('counts whole tokens, rounding a hair below a whole number up to it, never negative', () => {
    expect(wholeTokens(2.5)).toBe(2);
    expect(wholeTokens(3 - 1e-10)).toBe(3);
    expect(wholeTokens(3 - 1e-6)).toBe(2);
    expect(wholeTokens(0)).toBe(0);
    expect(wholeTokens(-0.5)).toBe(0);
  });
});

describe('msUntilTokens and msUntilFull', () => {
  it('is 0 when the tokens are there', () => {
    expect(msUntilTokens(1, 1, tenPerSecond)).toBe(0);
    expect(msUntilTokens(5, 3, tenPerSecond)).toBe(0);
    expect(msUntilTokens(1 - 1e-12, 1, tenPerSecond)).toBe(0);
  });

  it('rounds the wait up to whole milliseconds', () => {
    expect(msUntilTokens(0, 1, tenPerSecond)).toBe(100);
    expect(msUntilTokens(0.5, 1, tenPerSecond)).toBe(50);
    expect(msUntilTokens(0.999, 1, tenPerSecond)).toBe(1);
    expect(msUntilTokens(0, 3, tenPerSecond)).toBe(300);
    expect(msUntilTokens(0, 1, perSecond(3))).toBe(334); // 333.3… ms
    expect(msUntilTokens(0, 1, perMinute(100))).toBe(600);
    expect(msUntilTokens(0, 1, perHour(1000))).toBe(3600);
  });

  it('waits at least 1 ms for a deficit above the slack, however fast the rate', () => {
    expect(msUntilTokens(0, 1, perSecond(1e9))).toBe(1);
    expect(msUntilTokens(1 - 1e-6, 1, tenPerSecond)).toBe(1);
  });

  it('measures the way to a full bucket', () => {
    expect(msUntilFull(10, tenPerSecond)).toBe(0);
    expect(msUntilFull(0, tenPerSecond)).toBe(1000);
    expect(msUntilFull(9.5, tenPerSecond)).toBe(50);
    expect(msUntilFull(0, perMinute(100))).toBe(60_000);
    expect(msUntilFull(0, perHour(1000))).toBe(3_600_000);
  });
});

describe('bucket state', () => {
  it('starts full at the given time', () => {
    expect(fullBucket(tenPerSecond, 1234)).toEqual({ tokens: 10, updatedAtMs: 1234 });
  });

  it('advance refills in place, and ignores a clock that steps back', () => {
    const state: BucketState = { tokens: 2, updatedAtMs: 1000 };
    advance(state, tenPerSecond, 1300);
    expect(state).toEqual({ tokens: 5, updatedAtMs: 1300 });
    advance(state, tenPerSecond, 900);
    expect(state).toEqual({ tokens: 5, updatedAtMs: 1300 });
    advance(state, tenPerSecond, 1300);
    expect(state).toEqual({ tokens: 5, updatedAtMs: 1300 });
  });

  it('tryTake takes all of the cost or none of it', () => {
    const state = fullBucket(tenPerSecond, 0);
    expect(tryTake(state, tenPerSecond, 10, 0)).toBe(true);
    expect(state).toEqual({ tokens: 0, updatedAtMs: 0 });
    expect(tryTake(state, tenPerSecond, 1, 50)).toBe(false);
    expect(state).toEqual({ tokens: 0.5, updatedAtMs: 50 }); // refilled, nothing taken
    expect(msUntilTokens(state.tokens, 1, tenPerSecond)).toBe(50);
    expect(tryTake(state, tenPerSecond, 1, 100)).toBe(true);
    expect(state).toEqual({ tokens: 0, updatedAtMs: 100 });
    expect(tryTake(state, tenPerSecond, 3, 350)).toBe(false);
    expect(tryTake(state, tenPerSecond, 2, 350)).toBe(true);
    expect(state.tokens).toBeCloseTo(0.5, 12);
  });

  it('tryTake never leaves a negative balance when the slack admitted a hair short', () => {
    const state: BucketState = { tokens: 1 - 1e-10, updatedAtMs: 0 };
    expect(tryTake(state, tenPerSecond, 1, 0)).toBe(true);
    expect(state.tokens).toBe(0);
  });

  it('isFullAt says when the bucket may be forgotten', () => {
    const state: BucketState = { tokens: 9, updatedAtMs: 0 };
    expect(isFullAt(state, tenPerSecond, 99)).toBe(false);
    expect(isFullAt(state, tenPerSecond, 100)).toBe(true);
    expect(isFullAt(state, tenPerSecond, -5)).toBe(false);
    expect(state).toEqual({ tokens: 9, updatedAtMs: 0 }); // a question, not a change
  });
});

describe('large numbers stay exact', () => {
  const huge = defineLimit({ capacity: 1e9, refillPerSecond: 1e9 }); // 1e6 tokens per ms

  it('drains and refills the largest bucket to exact numbers', () => {
    const state = fullBucket(huge, 0);
    expect(tryTake(state, huge, 1e9, 0)).toBe(true);
    expect(state.tokens).toBe(0);
    expect(msUntilFull(0, huge)).toBe(1000);
    expect(msUntilTokens(0, 1e9, huge)).toBe(1000);
    expect(msUntilTokens(0, 1, huge)).toBe(1);
    expect(tryTake(state, huge, 1e9, 999)).toBe(false);
    expect(state.tokens).toBe(999_000_000);
    expect(msUntilTokens(state.tokens, 1e9, huge)).toBe(1);
    expect(tryTake(state, huge, 1e9, 1000)).toBe(true);
    expect(state.tokens).toBe(0);
  });

  it('takes one token at a time off a billion without drifting', () => {
    const state = fullBucket(huge, 0);
    for (let i = 1; i <= 1000; i++) expect(tryTake(state, huge, 1, 0)).toBe(true);
    expect(state.tokens).toBe(1e9 - 1000);
    expect(wholeTokens(state.tokens)).toBe(999_999_000);
    expect(msUntilFull(state.tokens, huge)).toBe(1);
  });

  it('caps an enormous elapsed time at the capacity instead of overflowing', () => {
    expect(refilled(0, Number.MAX_SAFE_INTEGER, huge)).toBe(1e9);
    expect(refilled(0, 1e300, huge)).toBe(1e9);
    const state: BucketState = { tokens: 0, updatedAtMs: -1e15 };
    expect(tryTake(state, huge, 1e9, 1e15)).toBe(true);
    expect(state).toEqual({ tokens: 0, updatedAtMs: 1e15 });
  });

  it('never says a wait 1 ms short at the fastest rates', () => {
    // 999,999.999999 tokens per ms: 1e9 / that is 1000.000000001 ms. Taking the slack off the
    // quotient instead of the deficit once gave 1000 here, and the retry was refused.
    const fast = defineLimit({ capacity: 1e9, refillPerSecond: 999_999_999.999 });
    expect(msUntilFull(0, fast)).toBe(1001);
    const state = fullBucket(fast, 0);
    expect(tryTake(state, fast, 1e9, 0)).toBe(true);
    expect(tryTake(state, fast, 1e9, 1)).toBe(false);
    const wait = msUntilTokens(state.tokens, 1e9, fast);
    expect(wait).toBe(1000);
    expect(tryTake(state, fast, 1e9, 1 + wait)).toBe(true);
  });

  it('handles the slowest refill of the largest bucket', () => {
    const slow = defineLimit({ capacity: 1e9, refillPerSecond: 0.001 });
    expect(slow.fillMs).toBe(1e15);
    expect(msUntilFull(0, slow)).toBe(1e15);
    expect(msUntilTokens(0, 1, slow)).toBe(1e6);
    const state: BucketState = { tokens: 0, updatedAtMs: 0 };
    expect(tryTake(state, slow, 1, 999_999)).toBe(false);
    expect(tryTake(state, slow, 1, 1e6)).toBe(true);
  });
});
