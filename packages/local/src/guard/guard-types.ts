import type { Clock, LimiterEvents, StoreError } from '@tiered-limiter/core';

/** Options of the circuit breaker inside a `StoreGuard`. */
export interface BreakerOptions {
  /**
   * Consecutive failed or timed-out store calls that open the breaker. While it is open no
   * request pays a timeout: the failure policy decides at once. Timeouts that fire within
   * `timeoutMs` of each other count as one (a stall of this process times out every call in
   * flight together), and a late answer to a call that timed out ends the streak.
   * @default 3
   */
  failureThreshold?: number;
  /**
   * Milliseconds an open breaker waits before letting one probe call through. The first
   * call that succeeds closes it, so recovery takes at most this long after the store is back.
   * @default 250
   */
  cooldownMs?: number;
}

/** Options of `StoreGuard`, shared by every limiter that calls a `GlobalStore`. */
export interface StoreGuardOptions {
  /**
   * Milliseconds a store call may take before it counts as failed, whatever the client is
   * doing (reconnecting, queueing). The request then gets its policy's decision.
   * @default 20
   */
  timeoutMs?: number;
  /** The circuit breaker, or `false` for none (every call then waits up to the timeout). */
  breaker?: BreakerOptions | false;
  /** Clock for the breaker's cooldown. @default performance */
  clock?: Clock;
}

/** The outcome of a guarded store call: a value, or the failure that the policy must handle. */
export type GuardResult<T> =
  | {
      /** The store answered. */
      readonly ok: true;
      /** Its answer. */
      readonly value: T;
    }
  | {
      /** The store failed, timed out, or the breaker refused the call. */
      readonly ok: false;
      /** Why: a `StoreError`, `StoreTimeoutError` or `CircuitOpenError`. */
      readonly error: StoreError;
    };

/** The breaker's state: `closed` calls go through, `open` none do, `half-open` one probe does. */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** Events a `StoreGuard` emits; limiters re-emit them (core's `LimiterEvents`). */
export type GuardEvents = LimiterEvents;

/**
 * What a guarded call resolves when it had nothing to send (a hand-back of a key that owes
 * nothing): no answer from the store, so no probe. Resolving `undefined` instead closed an open
 * breaker, and `recovered` said the store was back while it still refused every call.
 */
export const NOTHING_SENT: unique symbol = Symbol('nothing sent');
