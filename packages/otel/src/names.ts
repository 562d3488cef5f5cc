/**
 * The metric names `observeLimiter` and `instrumentStore` report, in OpenTelemetry's style
 * (a `tiered_limiter.` namespace, dot-separated, units in UCUM: `s`, `{decision}`, `{token}`).
 * No semantic convention covers rate limiters yet; the shapes follow ASP.NET Core's
 * `aspnetcore.rate_limiting.*` metrics (a count of requests by result, a lease-duration
 * histogram) and `db.client.operation.duration` for store calls.
 */
export const METRICS = Object.freeze({
  /** Decisions by outcome (`tiered_limiter.outcome`: `allowed`, `denied`). Counter, `{decision}`. */
  decisions: 'tiered_limiter.decisions',
  /**
   * Decisions by the tier that made them (`tiered_limiter.tier`). Counter, `{decision}`. Not
   * `tiered_limiter.decisions.*`: OpenTelemetry's naming rules want no plural namespace.
   */
  decisionsByTier: 'tiered_limiter.tier.decisions',
  /**
   * Operations sent to the shared store (refills and hand-backs, or per-request takes); a store that
   * coalesces, as `RedisStore` does, carries many in one call. Counter, `{operation}`.
   */
  storeOperations: 'tiered_limiter.store.operations',
  /** Tokens by what became of them (`tiered_limiter.token.state`). Counter, `{token}`. */
  tokens: 'tiered_limiter.tokens',
  /**
   * Tokens held in leases now. UpDownCounter, `{token}`: singular, as OpenTelemetry names an
   * UpDownCounter (`tiered_limiter.tokens.held` had a plural namespace and read as a counter's).
   */
  tokensHeld: 'tiered_limiter.token.held',
  /** Time spent degraded (the store considered down). Counter, `s`. */
  degradedTime: 'tiered_limiter.degraded.time',
  /** 1 while the store is considered down, else 0. Gauge, `1`. */
  degraded: 'tiered_limiter.degraded',
  /** Times the store was considered down (the breaker opened). Counter, `{event}`. */
  degradations: 'tiered_limiter.degradations',
  /** Live instances of the fleet sharing the limit, where the limiter counts them. Gauge, `{instance}`. */
  instances: 'tiered_limiter.fleet.instances',
  /** Duration of each store call (`tiered_limiter.store.operation`, `error.type`). Histogram, `s`. */
  storeDuration: 'tiered_limiter.store.operation.duration',
});

/** The attribute keys of those metrics (`error.type` is OpenTelemetry's own). */
export const ATTRIBUTES = Object.freeze({
  /** `allowed` or `denied`. */
  outcome: 'tiered_limiter.outcome',
  /** The `Decision`'s `tier`: `lease`, `global`, `fallback`, `local`. */
  tier: 'tiered_limiter.tier',
  /** `leased`, `taken`, `optimistic`, `refunded`, `expired`, `unreported`. */
  tokenState: 'tiered_limiter.token.state',
  /** A store call: `reserve` (a lease refill), `take`, `settle` (an op that asks for nothing: hand-backs, rewards, optimistic charges), `peek`, `reset`. */
  operation: 'tiered_limiter.store.operation',
  /** The failure of a store call: the error's `code` (`ERR_TL_STORE`, …), its name, or `_OTHER`. */
  errorType: 'error.type',
});

/**
 * Bucket bounds of the store-call histogram, in seconds: 0.25 ms to 1 s. A Redis round trip on
 * the same network takes 0.1–1 ms; a call past the limiter's timeout (20 ms by default) has
 * already been decided by the failure policy.
 */
export const STORE_DURATION_BUCKETS_S: readonly number[] = Object.freeze([
  0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1,
]);
