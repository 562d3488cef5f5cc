// What the other tiered-limiter packages share from core and users need not: the bucket
// arithmetic, the validators, the tie-breaking rule and a denial's reuse. Reached as `internal`
// from the package root (`import { internal } from '@tiered-limiter/core'`), not covered by semver.

// bucket.ts holds nothing but the arithmetic the other packages share, so all of it goes out.
export * from './bucket.js';
export { denyDecisionLike } from './decision.js';
export { bucketOpWrites, copySharedBucket } from './kept-buckets.js';
export { assertCost, assertKey, assertLimits, smallestCapacity, tightestWhenFull } from './limit.js';
export {
  generationFor,
  heldTokens,
  msUntilShared,
  resetSharedBucket,
  settleSharedBucket,
} from './shared-bucket.js';
export { assertStore, refusedKeyLimits, refusedOp, refusedReply } from './store.js';
export { isTighter } from './tightest.js';
export {
  assertBoolean,
  assertClock,
  assertInRange,
  assertInteger,
  assertKnownOptions,
  assertObject,
  assertOneOf,
  assertPositive,
} from './validate.js';
