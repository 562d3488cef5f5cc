import type { SharedBucketState } from './shared-bucket.js';
import type { BucketOp, BucketReply } from './store.js';

// What a store keeps of an op: `MemoryStore` and the tests' models of Redis apply each op to
// copies and write back as `apply.lua` does, so that all of them answer the next op alike.

/**
 * A bucket for a store to apply an op to, leaving the one it keeps as it was until it writes
 * (`bucketOpWrites`): its own list of generations, which settling shortens. The generations
 * themselves change only under reports and leases, which are always written, so they are shared.
 */
export function copySharedBucket(state: SharedBucketState): SharedBucketState {
  return { tokens: state.tokens, updatedAtUs: state.updatedAtUs, held: state.held.slice() };
}

/**
 * Whether a store keeps what `applyBucketOp` did to the buckets of `op`: only when it reported,
 * credited, debited or was granted tokens, as `apply.lua` writes only then. A refusal or a peek
 * kept would settle the buckets by the limits it carried, and a next op under changed limits would
 * find the old rate's refill where the store refills the whole gap at the new one.
 */
export function bucketOpWrites(op: BucketOp, reply: BucketReply): boolean {
  return (
    reply.granted > 0 ||
    (op.reports !== undefined && op.reports.length > 0) ||
    (op.credit ?? 0) > 0 ||
    (op.debit ?? 0) > 0
  );
}
