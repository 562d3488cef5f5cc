import { covers, MAX_WAIT_MS, msUntilTokens, TOKEN_EPSILON, wholeTokens } from './bucket.js';
import type { LimitSpec } from './limit.js';
import type { BucketOp, BucketReply } from './store.js';
import { isTighter } from './tightest.js';

/**
 * Tokens leased out of a shared bucket under one generation. They count against the bucket's
 * room until `releaseUs` (the store's clock), when they are released as spent, unless the
 * leaseholder reported them earlier (spent, or handed back unspent).
 */
export interface Generation {
  /** When the store releases these tokens, in whole µs of its clock; also the generation's id. */
  readonly releaseUs: number;
  /** Tokens of this generation still held by leases. */
  count: number;
}

/**
 * A shared token bucket that knows what is out on lease: `tokens` in the bucket (below 0 when
 * it is in debt) and `held`, tokens leased out and not yet accounted for. The bucket refills
 * only into the room `capacity − held`, so `tokens + held ≤ capacity` always: a token on lease
 * is a token the bucket does not have, and a hand-back can never put a token where the bucket
 * has refilled since. That is what keeps a fleet of leaseholders within one bucket's bound.
 */
export interface SharedBucketState {
  /** Tokens in the bucket at `updatedAtUs`; from −capacity (debt) to `capacity − held`. */
  tokens: number;
  /**
   * When `tokens` was last brought up to date, in whole µs of the store's clock. Absolute times
   * are whole µs so that every difference is exact: Redis's clock is about 1.8e15 µs, where a
   * double still holds every integer but a fraction of a ms would round.
   */
  updatedAtUs: number;
  /** Leased tokens per generation, earliest release first. */
  readonly held: Generation[];
}

/** A bucket as it is the first time a key is seen: full, nothing on lease. */
export function freshSharedBucket(spec: LimitSpec, nowUs: number): SharedBucketState {
  return { tokens: spec.capacity, updatedAtUs: nowUs, held: [] };
}

/** Tokens on lease across every generation. */
export function heldTokens(state: SharedBucketState): number {
  let held = 0;
  for (const generation of state.held) held += generation.count;
  return held;
}

/**
 * The generation a lease granted at `nowUs` for `holdMs` joins: its release, `nowUs + holdMs`
 * rounded up to a power-of-two quantum of ms of about an eighth of `holdMs`, so one key carries
 * about nine generations at most, and a token is never released before `holdMs` has passed.
 */
export function generationFor(nowUs: number, holdMs: number): number {
  let quantum = 1000;
  while (quantum * 16 <= holdMs * 1000) quantum *= 2;
  return Math.ceil((nowUs + holdMs * 1000) / quantum) * quantum;
}

function refillUnder(tokens: number, elapsedUs: number, spec: LimitSpec, room: number): number {
  if (!(elapsedUs > 0) || !(tokens < room)) return tokens;
  const next = tokens + (elapsedUs / 1000) * spec.refillPerMs;
  return next < room ? next : room;
}

/**
 * Brings `state` up to `nowUs` in place: releases every generation due by then and refills
 * piecewise, each stretch only into the room its held tokens left. Tokens above a lowered
 * capacity are cut to it. A clock that steps backwards changes nothing.
 */
export function settleSharedBucket(state: SharedBucketState, spec: LimitSpec, nowUs: number): void {
  let tokens = state.tokens > spec.capacity ? spec.capacity : state.tokens;
  let at = state.updatedAtUs;
  let held = heldTokens(state);
  let released = 0;
  for (const generation of state.held) {
    if (generation.releaseUs > nowUs) break;
    tokens = refillUnder(tokens, generation.releaseUs - at, spec, spec.capacity - held);
    if (generation.releaseUs > at) at = generation.releaseUs;
    held -= generation.count;
    released++;
  }
  if (released > 0) state.held.splice(0, released);
  tokens = refillUnder(tokens, nowUs - at, spec, spec.capacity - held);
  state.tokens = tokens;
  if (nowUs > at) at = nowUs;
  state.updatedAtUs = at;
}

/**
 * Milliseconds until `state` (settled at `nowUs`) holds `need` tokens with no other traffic:
 * 0 if it does, else a whole number from 1 up. Held tokens block the room until released, so
 * the wait may run through releases. Without held tokens it is `msUntilTokens` exactly.
 */
export function msUntilShared(
  state: SharedBucketState,
  spec: LimitSpec,
  need: number,
  nowUs: number,
): number {
  let tokens = state.tokens;
  if (covers(tokens, need)) return 0;
  let at = nowUs;
  let held = heldTokens(state);
  for (const generation of state.held) {
    const room = spec.capacity - held;
    if (covers(room, need)) {
      const ms = msUntilTokens(tokens, need, spec);
      if (at + ms * 1000 <= generation.releaseUs) return capped(Math.ceil((at - nowUs) / 1000) + ms);
    }
    tokens = refillUnder(tokens, generation.releaseUs - at, spec, room);
    at = generation.releaseUs;
    held -= generation.count;
  }
  return capped(Math.ceil((at - nowUs) / 1000) + msUntilTokens(tokens, need, spec));
}

function capped(ms: number): number {
  return ms > MAX_WAIT_MS ? MAX_WAIT_MS : ms;
}

/**
 * Makes `state` a full bucket at `nowUs` (`reset`), forgetting what is on lease, but fenced: the
 * latest release it held stays as a generation of no tokens until it is due, so that a report of a
 * lease from before the reset changes nothing and no lease made after it gets one of the old
 * generations (a report of the old lease would otherwise be counted against the new one).
 */
export function resetSharedBucket(state: SharedBucketState, spec: LimitSpec, nowUs: number): void {
  settleSharedBucket(state, spec, nowUs);
  const last = state.held.at(-1);
  state.held.length = 0;
  if (last !== undefined) state.held.push({ releaseUs: last.releaseUs, count: 0 });
  state.tokens = spec.capacity;
  state.updatedAtUs = nowUs;
}

/** The fence a reset left (`resetSharedBucket`): the last release before it, while it is due. */
function fenceOf(state: SharedBucketState): number | undefined {
  const first = state.held[0];
  return first !== undefined && first.count === 0 ? first.releaseUs : undefined;
}

/** Hands `returned` tokens of `generationId` back and accounts `spent` of them as used. */
function report(state: SharedBucketState, generationId: number, spent: number, returned: number): void {
  const held = state.held;
  for (let i = 0; i < held.length; i++) {
    const generation = held[i]!;
    if (generation.releaseUs !== generationId) continue;
    // A reset's fence: the lease reported was from before the reset, and is forgotten.
    if (generation.count === 0) return;
    const back = returned < generation.count ? returned : generation.count;
    state.tokens += back;
    const left = generation.count - back - spent;
    if (left > 0) generation.count = left;
    else held.splice(i, 1);
    return;
  }
  // Released already: the store counted those tokens as spent, so nothing comes back.
}

function hold(state: SharedBucketState, releaseUs: number, count: number): void {
  const held = state.held;
  let i = held.length;
  while (i > 0 && held[i - 1]!.releaseUs > releaseUs) i--;
  if (i > 0 && held[i - 1]!.releaseUs === releaseUs) held[i - 1]!.count += count;
  else held.splice(i, 0, { releaseUs, count });
}

function takeFrom(state: SharedBucketState, count: number): void {
  const left = state.tokens - count;
  // `covers` admitted up to TOKEN_EPSILON short: that sliver is rounding, not debt.
  state.tokens = left > 0 || left <= -TOKEN_EPSILON ? left : 0;
}

/**
 * Applies one `BucketOp` to the buckets of one key (one state per limit, in order), all at
 * `nowUs` (whole µs) of the store's clock, in place: settle, then the op's reports, credit, debit, and its
 * take or reserve (all-or-nothing across the limits). `RedisStore`'s `apply.lua` is the same
 * function line for line, and a property test keeps the two equal.
 */
export function applyBucketOp(
  states: readonly SharedBucketState[],
  limits: readonly LimitSpec[],
  op: BucketOp,
  nowUs: number,
): BucketReply {
  const n = limits.length;
  for (let i = 0; i < n; i++) settleSharedBucket(states[i]!, limits[i]!, nowUs);
  if (op.reports !== undefined) {
    for (const r of op.reports) {
      for (let i = 0; i < n; i++) report(states[i]!, r.generation, r.spent, r.returned);
    }
  }
  const credit = op.credit ?? 0;
  const debit = op.debit ?? 0;
  for (let i = 0; i < n; i++) {
    const state = states[i]!;
    const capacity = limits[i]!.capacity;
    if (credit > 0) {
      const room = capacity - heldTokens(state);
      if (state.tokens < room) state.tokens = state.tokens + credit < room ? state.tokens + credit : room;
    }
    // Into debt at most a capacity deep by debits, and never back up: a bucket already deeper (a
    // take or lease that borrowed `aheadMs` of refill) stays where it is.
    if (debit > 0 && state.tokens > -capacity) {
      state.tokens = state.tokens - debit > -capacity ? state.tokens - debit : -capacity;
    }
  }

  // What each limit may lend ahead of its refill (`op.aheadMs`), in tokens.
  const aheadMs = op.aheadMs ?? 0;
  let granted = 0;
  let generation = 0;
  let need = 1;
  let decided = false;
  // A take or a lease of no tokens (0, negative, NaN) is a peek, as `apply.lua` reads it: taken
  // here, a take of −1 put a token in a full bucket, past its capacity.
  if (op.take !== undefined && op.take > 0) {
    need = op.take;
    decided = true;
    let ok = true;
    for (let i = 0; i < n; i++)
      if (!covers(states[i]!.tokens + aheadMs * limits[i]!.refillPerMs, need)) ok = false;
    if (ok) {
      for (let i = 0; i < n; i++) takeFrom(states[i]!, need);
      granted = need;
    }
  } else if (op.reserve !== undefined && op.reserve.want > 0) {
    const { want, min, holdMs } = op.reserve;
    need = min;
    decided = true;
    granted = want;
    for (let i = 0; i < n; i++) {
      const whole = wholeTokens(states[i]!.tokens + aheadMs * limits[i]!.refillPerMs);
      if (whole < granted) granted = whole;
    }
    if (granted < min) granted = 0;
    if (granted > 0) {
      generation = generationFor(nowUs, holdMs);
      // Past any reset's fence: no lease after a reset shares a generation with one before it.
      for (let i = 0; i < n; i++) {
        const fence = fenceOf(states[i]!);
        if (fence !== undefined && generation <= fence) generation = fence + 1;
      }
      for (let i = 0; i < n; i++) {
        takeFrom(states[i]!, granted);
        hold(states[i]!, generation, granted);
      }
    }
  }

  // The reply speaks of one limit (core's isTighter): the longest wait (for what was asked when
  // it was refused, else for the next token), then the fewest whole tokens, then the longest
  // time until full.
  const admitted = decided && granted > 0;
  const waitFor = admitted ? 1 : need;
  let at = 0;
  let atWait = 0;
  let atRemaining = 0;
  let atFull = 0;
  for (let i = 0; i < n; i++) {
    const state = states[i]!;
    const spec = limits[i]!;
    const wait = msUntilShared(state, spec, waitFor - aheadMs * spec.refillPerMs, nowUs);
    const whole = wholeTokens(state.tokens);
    const full = msUntilShared(state, spec, spec.capacity, nowUs);
    if (i === 0 || isTighter(wait, whole, full, atWait, atRemaining, atFull)) {
      at = i;
      atWait = wait;
      atRemaining = whole;
      atFull = full;
    }
  }
  return {
    ok: decided ? admitted : atWait === 0,
    granted,
    generation,
    remaining: atRemaining,
    retryAfterMs: admitted ? 0 : atWait,
    resetMs: atFull,
    limitIndex: at,
  };
}

/** Whether `state` (settled) is full with nothing on lease: such a bucket can be forgotten. */
export function isSharedBucketFull(state: SharedBucketState, spec: LimitSpec): boolean {
  return state.held.length === 0 && covers(state.tokens, spec.capacity);
}
