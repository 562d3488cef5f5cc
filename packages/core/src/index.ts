export type { BucketState } from './bucket.js';
export {
  advance,
  covers,
  fullBucket,
  isFullAt,
  msUntilFull,
  msUntilTokens,
  refilled,
  TOKEN_EPSILON,
  tryTake,
  wholeTokens,
} from './bucket.js';
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
  StoreTimeoutError,
  TieredLimiterError,
} from './errors.js';
export type { LimitOptions, LimitSpec, RateOptions } from './limit.js';
export {
  assertCost,
  assertKey,
  assertLimits,
  defineLimit,
  MAX_CAPACITY,
  MAX_REFILL_PER_SECOND,
  MIN_REFILL_PER_SECOND,
  perHour,
  perMinute,
  perSecond,
  smallestCapacity,
  tightestWhenFull,
} from './limit.js';
export type { Limiter, LimiterEvents, LimiterStats, SyncLimiter } from './limiter.js';
export type { BucketReply, GlobalStore, ReserveReply, TakeReply } from './store.js';
export { assertStore } from './store.js';
export { isTighter } from './tightest.js';
export { assertInRange, assertInteger, assertOneOf, assertPositive } from './validate.js';
