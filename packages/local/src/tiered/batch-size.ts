import type { LimitSpec } from '@tiered-limiter/core';
import type { Lease } from './lease.js';

/** How the two-tier limiter sizes a lease request. All counts are tokens. */
export interface BatchPolicy {
  /** Smallest batch a refill asks for. */
  readonly minBatch: number;
  /** Largest batch a refill asks for. */
  readonly maxBatch: number;
  /** Most tokens one instance may ask for at once: its fair share of the capacity. */
  readonly fairShare: number;
  /** How long a batch should last at the observed rate, in ms. */
  readonly horizonMs: number;
  /** Instances assumed to compete near the limit; a batch asks for at most 1/this of what is left. */
  readonly competitors: number;
}

/** What one key's refill needs to know about demand and the global bucket. */
export interface BatchDemand {
  /** Tokens asked for (admitted or denied) since the last refill was sent. */
  readonly asked: number;
  /** Milliseconds since the last refill was sent. */
  readonly elapsedMs: number;
  /** Tokens that requests waiting right now need: the batch never asks for less. */
  readonly pending: number;
  /** The global bucket's remaining tokens, projected to now (refill since the last reply included). */
  readonly globalRemaining: number;
}

/**
 * Tokens to ask for: what this instance will use within the horizon at its observed rate,
 * clamped to [minBatch, min(maxBatch, fairShare)], shrunk to a share of what the global
 * bucket has left (so near the limit batches fall toward single tokens and precision is
 * highest where it matters), and never below what waiting requests need.
 */
export function batchSize(demand: BatchDemand, policy: BatchPolicy): number {
  const ratePerMs = demand.asked / Math.max(demand.elapsedMs, 1);
  let want = Math.ceil(ratePerMs * policy.horizonMs);
  if (want < policy.minBatch) want = policy.minBatch;
  if (want > policy.maxBatch) want = policy.maxBatch;
  if (want > policy.fairShare) want = policy.fairShare;
  const share = Math.max(1, Math.ceil(demand.globalRemaining / policy.competitors));
  if (want > share) want = share;
  return Math.max(want, demand.pending);
}

/**
 * A fleet member's share of what the tightest limit can have on lease at once: its capacity plus
 * the refill leases may borrow ahead (`aheadMs`), divided among `competitors`; at least 1.
 */
export function fairShare(limits: readonly LimitSpec[], competitors: number, aheadMs: number): number {
  let room = Number.POSITIVE_INFINITY;
  for (const limit of limits) {
    const own = limit.capacity + Math.floor(limit.refillPerMs * aheadMs);
    if (own < room) room = own;
  }
  return Math.max(1, Math.floor(room / competitors));
}

/**
 * One two-tier limiter's batch sizing as its fleet and limits change (the fair share follows
 * both), and the size of a lease request from the lease's demand since its last refill.
 */
export class BatchSizer {
  #policy: BatchPolicy;
  readonly #limits: () => readonly LimitSpec[];
  /** What a lease may borrow now, in ms of refill (it follows the sync's period). */
  readonly #aheadMs: () => number;

  constructor(policy: BatchPolicy, limits: () => readonly LimitSpec[], aheadMs: () => number) {
    this.#policy = policy;
    this.#limits = limits;
    this.#aheadMs = aheadMs;
  }

  /** The batch sizing in force. */
  get policy(): BatchPolicy {
    return this.#policy;
  }

  /** Sizes batches for the limits in force now (`setLimits`): the fair share follows the smallest room. */
  resize(): void {
    this.competitors(this.#policy.competitors, this.#policy.horizonMs);
  }

  /** Sizes batches for a fleet of `instances` over a horizon of `horizonMs` (the sync's lease life). */
  competitors(instances: number, horizonMs: number): void {
    this.#policy = {
      ...this.#policy,
      competitors: instances,
      horizonMs,
      fairShare: fairShare(this.#limits(), instances, this.#aheadMs()),
    };
  }

  /** Tokens to ask for `lease` in a refill sent at `sentAt`, at least `min`; its next demand counts from here. */
  want(lease: Lease, min: number, sentAt: number): number {
    const want = batchSize(
      {
        asked: lease.asked - lease.askedAtRefill,
        elapsedMs: sentAt - lease.lastRefillAtMs,
        pending: Math.max(lease.pendingCost - lease.tokens, min),
        globalRemaining: Math.min(
          lease.limit.capacity,
          lease.globalRemaining + (sentAt - lease.replyAtMs) * lease.limit.refillPerMs,
        ),
      },
      this.#policy,
    );
    lease.askedAtRefill = lease.asked;
    lease.lastRefillAtMs = sentAt;
    return want;
  }
}
