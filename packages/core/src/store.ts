import { ConfigError } from './errors.js';
import type { LimitSpec } from './limit.js';

/** The reply to `GlobalStore.take`. With several limits, it speaks of the tightest one. */
export interface TakeReply {
  /** Whether `cost` tokens were taken from every limit (all or nothing). */
  readonly allowed: boolean;
  /** Whole tokens left in the tightest limit after the call. */
  readonly remaining: number;
  /** 0 when allowed; else milliseconds until `cost` tokens are in every limit. */
  readonly retryAfterMs: number;
  /** Milliseconds until every limit is full (and the store's keys expire). */
  readonly resetMs: number;
  /** Capacity of the tightest limit. */
  readonly limit: number;
}

/** The reply to `GlobalStore.reserve`: a lease of `granted` tokens, taken from every limit. */
export interface ReserveReply {
  /** Tokens taken: 0, or from `min` to `want`. */
  readonly granted: number;
  /** Whole tokens left in the tightest limit after the call. */
  readonly remaining: number;
  /** 0 when something was granted; else milliseconds until `min` tokens are in every limit. */
  readonly retryAfterMs: number;
  /** Milliseconds until every limit is full. */
  readonly resetMs: number;
  /** Capacity of the tightest limit. */
  readonly limit: number;
}

/** The reply to `GlobalStore.refund` and `GlobalStore.peek`: the state, nothing taken. */
export interface BucketReply {
  /** Whole tokens in the tightest limit. */
  readonly remaining: number;
  /** Milliseconds until every limit is full. */
  readonly resetMs: number;
  /** Capacity of the tightest limit. */
  readonly limit: number;
}

/**
 * The contract a shared store fulfils: token buckets per `(key, limit)` that every instance
 * of a service sees alike, each call atomic across all the `limits` given. The store keeps
 * its own clock (Redis's `TIME`), so no caller's clock enters a bucket. It knows nothing of
 * leases, policies or timeouts: the limiters in `@tiered-limiter/local` add those. A store
 * rejects its promise on failure; the limiters turn that into a policy decision.
 *
 * `limits` is always a list made by `defineLimit` (names unique); `cost`, `want`, `min` and
 * `tokens` are whole numbers from 1 up, already checked by the caller, `min ≤ want`.
 */
export interface GlobalStore {
  /** Takes `cost` tokens from every limit if all have them, else nothing. */
  take(key: string, limits: readonly LimitSpec[], cost: number): Promise<TakeReply>;
  /** Takes as many tokens as every limit has, up to `want`; nothing if that is below `min`. */
  reserve(key: string, limits: readonly LimitSpec[], want: number, min: number): Promise<ReserveReply>;
  /** Gives back `tokens` unused leased tokens to every limit, never past its capacity. */
  refund(key: string, limits: readonly LimitSpec[], tokens: number): Promise<BucketReply>;
  /** Reports the tightest limit's state without taking anything. */
  peek(key: string, limits: readonly LimitSpec[]): Promise<BucketReply>;
}

/**
 * Checks that `store` fulfils `GlobalStore` (its four methods are there), so a limiter given
 * something else fails at construction, naming the option, rather than on its first request.
 */
export function assertStore(store: unknown): GlobalStore {
  const s = store as Partial<GlobalStore> | null;
  if (
    s === null ||
    typeof s !== 'object' ||
    typeof s.take !== 'function' ||
    typeof s.reserve !== 'function' ||
    typeof s.refund !== 'function' ||
    typeof s.peek !== 'function'
  ) {
    throw new ConfigError('store', store, 'a GlobalStore (an object with take, reserve, refund and peek)');
  }
  return store as GlobalStore;
}
