import {
  type BucketOp,
  type BucketReply,
  type Clock,
  type LimitSpec,
  smallestCapacity,
} from '@tiered-limiter/core';
import pLimit, { type LimitFunction } from 'p-limit';
import type { GuardedStore } from '../guard/guarded-store.js';
import type { GuardResult } from '../guard/store-guard.js';
import { batchSize } from './batch-size.js';
import { addGrant, type Lease, takeReports } from './lease.js';
import type { TieredConfig } from './options.js';
import { touchSharedClock } from './shared-clock.js';
import type { TieredCounters } from './stats.js';

/**
 * The one owner of a two-tier limiter's conversation with its store, nested one way: guard
 * (timeout, breaker) → queue (ops in flight) → store → the reply applied to the lease. An op is
 * built only when it is sent, so the reports it carries leave the lease's books exactly when
 * they leave the process; a grant is applied when its reply arrives, even after the request
 * that asked for it gave up on the timeout, so no granted token is stranded.
 */
export class Refiller {
  readonly #store: GuardedStore;
  readonly #config: TieredConfig;
  readonly #clock: Clock;
  readonly #counters: TieredCounters;
  readonly #limits: () => readonly LimitSpec[];
  readonly #queue: LimitFunction;
  #batch: TieredConfig['batch'];
  #onGrant: (lease: Lease) => void = () => {};

  constructor(
    store: GuardedStore,
    config: TieredConfig,
    clock: Clock,
    counters: TieredCounters,
    limits: () => readonly LimitSpec[],
  ) {
    this.#store = store;
    this.#config = config;
    this.#clock = clock;
    this.#counters = counters;
    this.#limits = limits;
    this.#queue = pLimit(config.maxConcurrentRefills);
    this.#batch = config.batch;
  }

  /** Called with a lease that just received tokens (the lease book keeps or returns them). */
  onGrant(hook: (lease: Lease) => void): void {
    this.#onGrant = hook;
  }

  /** Sizes batches for new limits: the fair share follows the smallest capacity. */
  resize(limits: readonly LimitSpec[]): void {
    const capacity = smallestCapacity(limits);
    this.#batch = { ...this.#batch, fairShare: Math.max(1, Math.floor(capacity / this.#batch.competitors)) };
  }

  /**
   * The refill in flight for `lease`, or a new one asking for at least `min` tokens. Resolves the
   * reply (already applied to the lease) or the failure the policy must handle; never rejects.
   */
  refill(lease: Lease, min: number): Promise<GuardResult<BucketReply>> {
    if (lease.refill !== undefined) return lease.refill;
    const refill = this.#store.guard.run(() =>
      this.#queue(() => {
        const sentAt = this.#clock.now();
        const op = this.#reserveOp(lease, min, sentAt);
        this.#counters.refills++;
        return this.#store.store.apply(op).then(
          (reply) => {
            this.#apply(lease, op, reply, sentAt);
            return reply;
          },
          (error: unknown) => {
            this.#lost(op);
            throw error;
          },
        );
      }),
    );
    lease.refill = refill;
    void refill.then(() => {
      if (lease.refill === refill) lease.refill = undefined;
    });
    return refill;
  }

  /**
   * Sends what `lease` owes the store (spends and hand-backs) with nothing asked in return.
   * `force` goes past an open breaker with its own timeout (`close()` does, so that a brief blip
   * does not cost every leased token). Resolves whether the store took it.
   */
  settle(lease: Lease, force?: { timeoutMs: number }): Promise<boolean> {
    const send = () =>
      this.#queue(() => {
        const reports = takeReports(lease);
        if (reports === undefined) return Promise.resolve(true);
        const op: BucketOp = { key: lease.key, limits: this.#limits(), reports };
        this.#counters.refunds++;
        return this.#store.store.apply(op).then(
          () => {
            this.#counters.tokensRefunded += returned(op);
            return true;
          },
          (error: unknown) => {
            this.#lost(op);
            throw error;
          },
        );
      });
    const run =
      force === undefined ? this.#store.guard.run(send) : this.#store.guard.force(send, force.timeoutMs);
    return run.then((result) => result.ok);
  }

  #reserveOp(lease: Lease, min: number, sentAt: number): BucketOp {
    const limits = this.#limits();
    const want = batchSize(
      {
        used: lease.usedSinceRefill,
        elapsedMs: sentAt - lease.lastRefillAtMs,
        pending: Math.max(lease.pendingCost - lease.tokens, min),
        globalRemaining: Math.min(
          lease.limit.capacity,
          lease.globalRemaining + (sentAt - lease.replyAtMs) * lease.limit.refillPerMs,
        ),
      },
      this.#batch,
    );
    lease.usedSinceRefill = 0;
    lease.lastRefillAtMs = sentAt;
    return {
      key: lease.key,
      limits,
      reports: takeReports(lease),
      reserve: { want, min: Math.min(min, want), holdMs: this.#config.holdMs },
    };
  }

  #apply(lease: Lease, op: BucketOp, reply: BucketReply, sentAt: number): void {
    // A reply is a moment the main thread runs anyway: bring the shared clock up to date too.
    touchSharedClock();
    const now = this.#clock.now();
    const counters = this.#counters;
    counters.latency(now - sentAt);
    counters.tokensLeased += reply.granted;
    counters.tokensRefunded += returned(op);
    if (reply.granted > 0) {
      // A token's life here counts from when it was asked for, before the store granted it; the
      // store counts its hold from the grant, later, and holds it longer still.
      addGrant(lease, reply.generation, sentAt + this.#config.ttlMs, reply.granted);
      lease.lowWater = Math.ceil(reply.granted * this.#config.lowWater);
    }
    lease.globalRemaining = reply.remaining;
    lease.replyAtMs = now;
    lease.resetMs = reply.resetMs;
    lease.limit = op.limits[reply.limitIndex] ?? lease.limit;
    // A denial is remembered only when no whole token is left: a cost above what is left must
    // not turn away a smaller one the bucket still has.
    const deniedUntil = reply.granted > 0 || reply.remaining > 0 ? 0 : now + Math.max(1, reply.retryAfterMs);
    lease.deniedUntilMs = deniedUntil > lease.blockedUntilMs ? deniedUntil : lease.blockedUntilMs;
    if (reply.granted > 0) this.#onGrant(lease);
  }

  #lost(op: BucketOp): void {
    if (op.reports === undefined) return;
    for (const r of op.reports) this.#counters.tokensUnreported += r.spent + r.returned;
  }
}

function returned(op: BucketOp): number {
  let tokens = 0;
  if (op.reports !== undefined) for (const r of op.reports) tokens += r.returned;
  return tokens;
}
