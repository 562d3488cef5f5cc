export type { AcquireOptions, AcquireResult } from './acquire.js';
export { MAX_BLOCK_MS } from './block-list.js';
export {
  DEFAULT_ASSUMED_INSTANCES,
  DEFAULT_CLOSE_TIMEOUT_MS,
  DEFAULT_CLOSED_RETRY_AFTER_MS,
  DEFAULT_COOLDOWN_MS,
  DEFAULT_FAILURE_THRESHOLD,
  DEFAULT_HORIZON_MS,
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_LOW_WATER,
  DEFAULT_MAX_BATCH,
  DEFAULT_MAX_CONCURRENT_REFILLS,
  DEFAULT_MAX_KEYS,
  DEFAULT_MAX_WAIT_MS,
  DEFAULT_MEMORY_STORE_MAX_KEYS,
  DEFAULT_MIN_BATCH,
  DEFAULT_TIMEOUT_MS,
  MAX_MAX_KEYS,
  MIN_LEASE_GRACE_MS,
} from './defaults.js';
export type { FailurePolicyOptions, LocalFallbackOptions } from './guard/failure-policy.js';
export type { StoreLimiterOptions } from './guard/guarded-store.js';
export type {
  BreakerOptions,
  BreakerState,
  GuardEvents,
  GuardResult,
  StoreGuardOptions,
} from './guard/store-guard.js';
export { StoreGuard } from './guard/store-guard.js';
export type { LocalLimiterOptions } from './local-limiter.js';
export { LocalLimiter } from './local-limiter.js';
export type { RequestLimiterOptions, RequestLimiterStats } from './request-limiter.js';
export { RequestLimiter } from './request-limiter.js';
export type { MemoryStoreOptions } from './stores/memory-store.js';
export { MemoryStore } from './stores/memory-store.js';
export type { ColdStartOptions, SyncOptions } from './tiered/fleet-options.js';
export type { LeaseOptions, TieredLimiterOptions } from './tiered/options.js';
export type { TieredLimiterEvents, TieredLimiterStats } from './tiered/stats.js';
export { TieredLimiter } from './tiered/tiered-limiter.js';
