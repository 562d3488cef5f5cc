import type { LimiterStats } from '@tiered-limiter/core';
import type { StoreLimiterOptions } from './guard/guarded-store.js';

/** Options of `RequestLimiter`. */
export interface RequestLimiterOptions extends StoreLimiterOptions {
  /**
   * Keys `block()` remembers at most (the only per-key state this limiter keeps in process, with
   * the denials `rememberDenials` keeps and the keys last reset, rewarded or penalised it notes
   * for them, as many each).
   * @default 100_000
   */
  maxKeys?: number;
  /**
   * Turns a key the store turned away (a cost of 1) away in process, with no store op, until a
   * token could pass (rate-limiter-flexible's `inMemoryBlockOnConsumed`). It never admits more:
   * at worst a key stays turned away until its wait is over after another instance reset it or
   * gave tokens back. Off by default: an operator's `reset` of a locked-out login on one
   * instance should reach every instance at once.
   * @default false
   */
  rememberDenials?: boolean;
}

/** Counters of a `RequestLimiter` since it was made. */
export interface RequestLimiterStats extends LimiterStats {
  /** Decisions by the tier that made them (`local`: a key blocked in process). */
  readonly decisions: {
    /** Decided by a store call. */
    readonly global: number;
    /** Decided by the failure policy. */
    readonly fallback: number;
    /** Decided in process: a blocked key, or (`rememberDenials`) one the store turned away. */
    readonly local: number;
  };
  /**
   * Operations sent to the store. A store that coalesces (`RedisStore`) carries many in one call;
   * its own `stats().calls` counts the round trips.
   */
  readonly storeOps: number;
  /** Store calls that failed or timed out. */
  readonly storeFailures: number;
  /** Milliseconds spent degraded (store considered down), the current spell included, until `close()` ends. */
  readonly fallbackMs: number;
}
