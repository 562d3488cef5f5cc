import type { LimitSpec } from './limit.js';

/**
 * Slack in token comparisons. Tokens are doubles; `tokens + elapsed × rate` can land one
 * ulp below a whole number that exact arithmetic reaches, and a request retried exactly at
 * its `retryAfterMs` must then still be admitted.
 */
export const TOKEN_EPSILON = 1e-9;

/**
 * The state of one token bucket: the tokens it held at `updatedAtMs`. Time is whatever the
 * caller's clock says (monotonic milliseconds); this module never reads a clock itself.
 */
export interface BucketState {
  /** Tokens at `updatedAtMs`, from 0 to the capacity. */
  tokens: number;
  /** When `tokens` was last brought up to date, in the caller's clock. */
  updatedAtMs: number;
}

/**
 * Tokens after `elapsedMs` of refill: never more than the capacity, never fewer than before
 * (a clock that steps backwards adds nothing rather than taking tokens away).
 */
export function refilled(tokens: number, elapsedMs: number, spec: LimitSpec): number {
  if (!(elapsedMs > 0)) return tokens;
  const next = tokens + elapsedMs * spec.refillPerMs;
  return next < spec.capacity ? next : spec.capacity;
}

/** Whether `tokens` cover `cost`, with `TOKEN_EPSILON` of slack for rounding. */
export function covers(tokens: number, cost: number): boolean {
  return tokens + TOKEN_EPSILON >= cost;
}

/** Whole tokens left: what a caller may still spend, never negative. */
export function wholeTokens(tokens: number): number {
  const whole = Math.floor(tokens + TOKEN_EPSILON);
  return whole > 0 ? whole : 0;
}

/**
 * The longest wait any store replies, in ms (2^52, about 142,700 years): a billion tokens at the
 * slowest rate take 10^18 ms, past the whole numbers a double holds, and node-redis reads some
 * integer replies just under 2^53 one off. The Redis script caps its waits and TTLs at the same.
 */
export const MAX_WAIT_MS = 2 ** 52;

/**
 * Milliseconds until the bucket holds `cost` tokens with no other traffic: 0 if it already
 * does, else a whole number from 1 up, rounded up so that retrying after it succeeds.
 */
export function msUntilTokens(tokens: number, cost: number, spec: LimitSpec): number {
  const deficit = cost - tokens;
  if (deficit <= TOKEN_EPSILON) return 0;
  // The slack is in tokens, so it comes off the deficit before dividing: taken off the quotient
  // instead it is worth `rate × 1e-9` tokens, a thousandth of a token at 1e9/s, and the wait
  // came out 1 ms short (a full drain of 1e9 at 999,999,999.999/s said 1000 ms, not 1001).
  let ms = Math.ceil((deficit - TOKEN_EPSILON) / spec.refillPerMs);
  if (ms < 1) ms = 1;
  // The division and the refill's product round separately; check with the refill's own sum.
  if (!covers(tokens + ms * spec.refillPerMs, cost)) ms += 1;
  return ms > MAX_WAIT_MS ? MAX_WAIT_MS : ms;
}

/**
 * Milliseconds until the bucket is full: the `resetMs` of a decision, and the time a store
 * may keep the key (a full bucket equals no bucket, so the key can expire then).
 */
export function msUntilFull(tokens: number, spec: LimitSpec): number {
  return msUntilTokens(tokens, spec.capacity, spec);
}

/** A bucket as it is the first time a key is seen: full. */
export function fullBucket(spec: LimitSpec, nowMs: number): BucketState {
  return { tokens: spec.capacity, updatedAtMs: nowMs };
}

/** Brings `state` up to `nowMs` in place. A clock that steps backwards changes nothing. */
export function advance(state: BucketState, spec: LimitSpec, nowMs: number): void {
  const elapsed = nowMs - state.updatedAtMs;
  if (elapsed > 0) {
    state.tokens = refilled(state.tokens, elapsed, spec);
    state.updatedAtMs = nowMs;
  }
}

/**
 * Refills `state` to `nowMs` and takes `cost` tokens if they are there, in place. Returns
 * whether it took them; a bucket that lacks them is left with what it had.
 */
export function tryTake(state: BucketState, spec: LimitSpec, cost: number, nowMs: number): boolean {
  advance(state, spec, nowMs);
  if (!covers(state.tokens, cost)) return false;
  const left = state.tokens - cost;
  state.tokens = left > 0 ? left : 0;
  return true;
}

/** Whether `state` would be full at `nowMs`: such a bucket can be forgotten. */
export function isFullAt(state: BucketState, spec: LimitSpec, nowMs: number): boolean {
  return covers(refilled(state.tokens, nowMs - state.updatedAtMs, spec), spec.capacity);
}
