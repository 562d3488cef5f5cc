export type { AcquireOptions, AcquireResult } from './acquire.js';
export { DEFAULT_MAX_KEYS, MAX_MAX_KEYS } from './defaults.js';
export type { FailurePolicyOptions, LocalFallbackOptions } from './failure-policy.js';
export { divideLimits, FailurePolicyDecider } from './failure-policy.js';
export {
  DEFAULT_CLOSED_RETRY_AFTER_MS,
  DEFAULT_COOLDOWN_MS,
  DEFAULT_FAILURE_THRESHOLD,
  DEFAULT_TIMEOUT_MS,
} from './guard-defaults.js';
export type { LocalLimiterOptions } from './local-limiter.js';
export { LocalLimiter } from './local-limiter.js';
export type { MemoryStoreOptions } from './memory-store.js';
export { MemoryStore } from './memory-store.js';
export type { RequestLimiterOptions, RequestLimiterStats } from './request-limiter.js';
export { RequestLimiter } from './request-limiter.js';
export type {
  BreakerOptions,
  BreakerState,
  GuardEvents,
  GuardResult,
  StoreGuardOptions,
} from './store-guard.js';
export { StoreGuard } from './store-guard.js';
export {
  DEFAULT_ASSUMED_INSTANCES,
  DEFAULT_COARSE_TICK_MS,
  DEFAULT_HORIZON_MS,
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_LOW_WATER,
  DEFAULT_MAX_BATCH,
  DEFAULT_MAX_CONCURRENT_REFILLS,
  DEFAULT_MAX_WAIT_MS,
  DEFAULT_MIN_BATCH,
} from './tiered-defaults.js';
export type { LeaseOptions, TieredLimiterOptions, TieredLimiterStats } from './tiered-limiter.js';
export { TieredLimiter } from './tiered-limiter.js';
