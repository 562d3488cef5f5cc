import * as internal from './internal.js';

export type { Clock } from './clock.js';
export type { Decision, DecisionTier, FailurePolicy } from './decision.js';
export { allowDecision, denyDecision, shadowOf } from './decision.js';
export {
  ArgumentError,
  CircuitOpenError,
  ClosedError,
  ConfigError,
  CostExceedsCapacityError,
  StoreError,
  StoreReplyError,
  StoreTimeoutError,
  StoreWithdrawnError,
  TieredLimiterError,
} from './errors.js';
export type { LimitOptions, LimitSpec } from './limit.js';
export { defineLimit, MAX_CAPACITY, MAX_REFILL_PER_SECOND, MIN_REFILL_PER_SECOND } from './limit.js';
export type { Limiter, LimiterEvents, LimiterStats, SyncLimiter } from './limiter.js';
export type { RateOptions } from './rates.js';
export { perHour, perMinute, perSecond } from './rates.js';
export type { Generation, SharedBucketState } from './shared-bucket.js';
export { applyBucketOp, freshSharedBucket, isSharedBucketFull } from './shared-bucket.js';
export type { BucketOp, BucketReply, CallerWait, GlobalStore, LeaseReport, ReserveRequest } from './store.js';
/**
 * What the other tiered-limiter packages share from core and applications need not: the bucket
 * arithmetic, the validators, the rule that picks the limit a decision speaks of. It is exported
 * so that `@tiered-limiter/local`, `redis` and `http` (and their tests) use one copy of it; it is
 * not covered by semver, and may change in any release.
 */
export { internal };
