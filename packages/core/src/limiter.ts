import type { Decision } from './decision.js';
import type { StoreError } from './errors.js';
import type { LimitSpec } from './limit.js';

/** Events every limiter that calls a shared store emits. */
export interface LimiterEvents {
  /** A store call failed or timed out (every one, breaker open or not). */
  failure: [error: StoreError];
  /** The breaker opened: the store is considered down, limits decide by their policy. */
  degraded: [error: StoreError];
  /** The store answered again after being degraded, `downMs` after it went down. */
  recovered: [
    info: {
      /** Milliseconds the store was considered down, from the breaker opening to its first answer. */
      downMs: number;
    },
  ];
}

/** Counters every limiter reports; each limiter adds its own beside them. */
export interface LimiterStats {
  /** Decisions that admitted. */
  readonly allowed: number;
  /** Decisions that denied (shadow-mode denials included: they are what the limit decided). */
  readonly denied: number;
}

/**
 * What every limiter of tiered-limiter does, whatever tier decides: take tokens for a key,
 * look without taking, manage a key (reset, reward, penalty, block), change its limits live,
 * report counters and close. The HTTP middleware and the limiter contract suite are written
 * against it. A store failure never rejects any of these promises: `consume` and `peek`
 * resolve the failure policy's decision, and the management calls resolve `false` when the
 * store could not be reached (the `failure` event tells why).
 */
export interface Limiter {
  /** The limits, all-or-nothing, as in force now. */
  readonly limits: readonly LimitSpec[];
  /** Takes `cost` tokens for `key`; resolves a `Decision`, never rejects for a store failure. */
  consume(key: string, cost?: number): Promise<Decision>;
  /** What a request of cost 1 would get now, taking nothing. */
  peek(key: string): Promise<Decision>;
  /** Forgets `key` everywhere: its next request finds full buckets. */
  reset(key: string): Promise<boolean>;
  /** Gives `tokens` back to `key` (never past its capacity): a request that did not count. */
  reward(key: string, tokens: number): Promise<boolean>;
  /** Takes `tokens` from `key` regardless; the bucket may go into debt, at most its capacity deep. */
  penalty(key: string, tokens: number): Promise<boolean>;
  /** Denies `key` for `ms` milliseconds, decided in process with no store call. */
  block(key: string, ms: number): void;
  /**
   * Replaces the limits. A limit that keeps its name keeps every key's state (tokens cut to the
   * new capacity); a new name starts full, as buckets are kept by name. An unnamed limit is named
   * by its numbers (`perSecond(100)` is `100ps`), so name the limits you will change.
   */
  setLimits(limits: LimitSpec | readonly LimitSpec[]): void;
  /** Counters since the limiter was made. */
  stats(): LimiterStats;
  /** Stops the limiter; later calls throw `ClosedError`. */
  close(): Promise<void>;
}

/**
 * A limiter that can often decide synchronously: `tryConsume` answers from process memory
 * with no promise, or returns `undefined` when only `consume` can answer.
 */
export interface SyncLimiter extends Limiter {
  /** A decision made in process, or `undefined` when only the store can answer. */
  tryConsume(key: string, cost?: number): Decision | undefined;
}
