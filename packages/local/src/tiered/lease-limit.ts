/**
 * What a lease tells of its key's limit: which limit it speaks of once the limits change
 * (`relimit`), and the decision its remembered denial gives (`rememberedDenial`).
 */
import { type Decision, type DecisionTier, internal, type LimitSpec } from '@tiered-limiter/core';
import type { Lease } from './lease.js';

const { denyDecisionLike, msUntilTokens, tightestWhenFull } = internal;

/**
 * Points `lease` at one of `limits`, the limiter's new ones (`setLimits`): the limit of the same
 * name, its last known level cut to the new capacity, else the one a new lease starts with
 * (`tightestWhenFull`), full as far as this instance knows. Left on a replaced limit, a blocked
 * key's denial named a limit the limiter no longer has (and the HTTP headers announced another's
 * numbers under it) until the key's next reply.
 */
export function relimit(lease: Lease, limits: readonly LimitSpec[]): void {
  for (const spec of limits) {
    if (spec.name !== lease.limit.name) continue;
    lease.limit = spec;
    if (lease.globalRemaining > spec.capacity) lease.globalRemaining = spec.capacity;
    return;
  }
  const spec = tightestWhenFull(limits);
  lease.limit = spec;
  lease.globalRemaining = spec.capacity;
  lease.resetMs = 0;
}

/**
 * The decision a key's remembered denial gives a request of `cost` at `nowMs`: wait until the
 * denial ends, or, if later, until the bucket as last heard of (refilling since, plus what a lease
 * may borrow, `aheadMs`) could hold the tokens the lease lacks. A denial kept until the next sync
 * knows only the sync's time; this keeps its wait honest for a cost the bucket needs longer for.
 * A blocked key waits for the block's end alone.
 */
export function rememberedDenial(
  lease: Lease,
  cost: number,
  nowMs: number,
  aheadMs: number,
  tier: DecisionTier,
): Decision {
  const spec = lease.limit;
  const until = lease.deniedUntilMs - nowMs;
  // A block's end is the whole answer: the bucket has nothing to do with it. Decided in process,
  // by the caller's `block`, so tier `local`, as every limiter's block says.
  let waitMs = until;
  let by = tier;
  if (lease.blockedUntilMs > nowMs) {
    by = 'local';
  } else {
    const need = cost - lease.tokens;
    const known = lease.globalRemaining + (nowMs - lease.replyAtMs + aheadMs) * spec.refillPerMs;
    let refill = msUntilTokens(known, need, spec);
    if (lease.tokenAtMs > nowMs && need > 1) {
      const fromToken = Math.ceil(lease.tokenAtMs - nowMs + (need - 1) / spec.refillPerMs);
      if (fromToken < refill) refill = fromToken;
    }
    waitMs = until > refill ? until : refill;
  }
  lease.denial = denyDecisionLike(lease.denial, waitMs, lease.tokens, lease.resetMs, spec, by);
  return lease.denial;
}
