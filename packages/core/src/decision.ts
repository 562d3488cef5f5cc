import type { StoreError } from './errors.js';
import type { LimitSpec } from './limit.js';

/**
 * Which part of the limiter made a decision: `local` an in-process bucket (`LocalLimiter`),
 * `lease` tokens already leased from the shared store, `global` a call to the shared store,
 * `fallback` the limit's failure policy because the store failed, timed out or was skipped.
 */
export type DecisionTier = 'local' | 'lease' | 'global' | 'fallback';

/**
 * What a limit does while its shared store is failing: `open` admits, `closed` denies,
 * `local` decides from a conservative in-process bucket (leftover leased tokens first).
 */
export type FailurePolicy = 'open' | 'closed' | 'local';

/**
 * The answer to one request. A denial is a resolved value, never a rejected promise, and
 * every field is a relative duration or a count, so no host's clock skew can leak into it.
 */
export interface Decision {
  /** Whether the request may go ahead. */
  readonly allowed: boolean;
  /** Whole tokens left in the tightest limit after this request; never negative. */
  readonly remaining: number;
  /** 0 when allowed; else milliseconds until the same request could be admitted (≥ 1). */
  readonly retryAfterMs: number;
  /**
   * Milliseconds until the limit this decision speaks of is full again. Another of several limits
   * may take longer: of 10 per second and 1,000 per hour, one request says 100 ms, the second's.
   */
  readonly resetMs: number;
  /** Capacity of the limit this decision speaks of (the `RateLimit-Limit` a server would announce). */
  readonly limit: number;
  /**
   * Name of the limit this decision speaks of: the one that denied (the longest wait for this
   * request), else the one the next request meets first (the longest wait for one more token),
   * then the fewest whole tokens left, then the longest time until full, then the first listed
   * (core's `isTighter`). `remaining`, `limit`, `retryAfterMs` and `resetMs` are that limit's, so
   * a caller never mixes one limit's name with another's numbers.
   */
  readonly name: string;
  /** Which tier decided. */
  readonly tier: DecisionTier;
  /** The failure policy that decided, when `tier` is `fallback`; else `undefined`. */
  readonly policy: FailurePolicy | undefined;
  /** The store failure behind a `fallback` decision; else `undefined`. */
  readonly error: StoreError | undefined;
  /**
   * True when the limit runs in shadow mode and would have denied this request: `allowed`
   * is then true (shadow mode never enforces) and the other fields describe the denial.
   */
  readonly shadowDenied: boolean;
}

/**
 * An admitting decision. The object literal always has the same shape, so the hot path
 * stays monomorphic. `remaining` is held to 0 … the limit's capacity: a two-tier limiter adds its
 * lease's tokens to the bucket's last-known remaining, and once the bucket forgot that lease (Redis
 * evicted its key, another instance reset it) the sum ran past the limit (42 of 40).
 */
export function allowDecision(
  remaining: number,
  resetMs: number,
  spec: LimitSpec,
  tier: DecisionTier,
  policy?: FailurePolicy,
  error?: StoreError,
): Decision {
  return {
    allowed: true,
    remaining: remaining > 0 ? (remaining < spec.capacity ? remaining : spec.capacity) : 0,
    retryAfterMs: 0,
    resetMs,
    limit: spec.capacity,
    name: spec.name,
    tier,
    policy,
    error,
    shadowDenied: false,
  };
}

/** A denial's wait as it is told: whole ms, at least 1, so that denied ⇔ retryAfterMs > 0. */
const wholeWaitMs = (retryAfterMs: number): number => (retryAfterMs >= 1 ? Math.ceil(retryAfterMs) : 1);

/** A denying decision; `retryAfterMs` is raised to at least 1 so that denied ⇔ retryAfterMs > 0. */
export function denyDecision(
  retryAfterMs: number,
  remaining: number,
  resetMs: number,
  spec: LimitSpec,
  tier: DecisionTier,
  policy?: FailurePolicy,
  error?: StoreError,
): Decision {
  return {
    allowed: false,
    remaining: remaining > 0 ? remaining : 0,
    retryAfterMs: wholeWaitMs(retryAfterMs),
    resetMs,
    limit: spec.capacity,
    name: spec.name,
    tier,
    policy,
    error,
    shadowDenied: false,
  };
}

/**
 * `denyDecision(retryAfterMs, remaining, resetMs, spec, tier)`, or `previous` when it holds those
 * very values. A key denied from memory is asked again and again with the same answer (its wait
 * counts whole milliseconds), and a hot key under attack is asked millions of times a second:
 * handing back the decision already made spares the allocation and the garbage it becomes.
 */
export function denyDecisionLike(
  previous: Decision | undefined,
  retryAfterMs: number,
  remaining: number,
  resetMs: number,
  spec: LimitSpec,
  tier: DecisionTier,
): Decision {
  if (
    previous !== undefined &&
    previous.retryAfterMs === wholeWaitMs(retryAfterMs) &&
    previous.remaining === (remaining > 0 ? remaining : 0) &&
    previous.resetMs === resetMs &&
    previous.tier === tier &&
    previous.limit === spec.capacity &&
    previous.name === spec.name &&
    !previous.allowed &&
    previous.policy === undefined &&
    previous.error === undefined &&
    !previous.shadowDenied
  ) {
    return previous;
  }
  return denyDecision(retryAfterMs, remaining, resetMs, spec, tier);
}

/**
 * What a shadow-mode limit returns for `decision`: admitted whatever it says, with
 * `shadowDenied` telling whether it would have denied.
 */
export function shadowOf(decision: Decision): Decision {
  if (decision.allowed) return decision;
  return { ...decision, allowed: true, retryAfterMs: 0, shadowDenied: true };
}
