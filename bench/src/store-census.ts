import type { BucketOp, BucketReply, CallerWait, GlobalStore, LimitSpec } from '@tiered-limiter/core';

/** Where a store op came from, as far as the store can tell. */
export type OpOrigin = 'sync' | 'outOfBand' | 'refund';

/** Ops by origin, and the periodic syncs that sent them. */
export interface OpCensus {
  /** Ops a periodic sync sent (hand-backs, spends and next leases of every held key). */
  readonly sync: number;
  /** Ops that ask for tokens outside a sync: a refill or a take for a waiting request. */
  readonly outOfBand: number;
  /** Ops outside a sync that only report (hand-backs, spends, an optimistic debit). */
  readonly refund: number;
  /** Syncs that sent at least one op. */
  readonly syncs: number;
  /** Round trips those syncs make at most: each sync's keys ÷ keys per call, rounded up. */
  readonly syncCalls: number;
}

/**
 * Microtask hops a sync window stays open after the heartbeat that opens it: the sync's ops
 * reach the store a few hops later (guard, p-limit queue), all within the same drain of the
 * microtask queue, which no timer or I/O callback can interleave.
 */
const SYNC_WINDOW_HOPS = 64;

/**
 * A `GlobalStore` that forwards every call to `inner` and sorts the ops by origin, for the bench's
 * fleet rows: the two-tier limiter's periodic sync begins with a heartbeat and sends its ops in
 * the same drain of the microtask queue, so an op made between a heartbeat and the end of that
 * drain is the sync's; any other op asks for tokens (out of band) or only reports (a refund).
 * When `inner` has no `heartbeat` (a `RedisStore` before it gains one), this answers with the
 * declared fleet size, which is what the limiter would assume without one.
 */
export class CensusStore implements GlobalStore {
  readonly #inner: GlobalStore;
  readonly #declared: number;
  readonly #maxKeysPerCall: number;
  #inSync = false;
  #syncKeys = 0;
  #sync = 0;
  #outOfBand = 0;
  #refund = 0;
  #syncs = 0;
  #syncCalls = 0;

  constructor(inner: GlobalStore, declared: number, maxKeysPerCall = 32) {
    this.#inner = inner;
    this.#declared = declared;
    this.#maxKeysPerCall = maxKeysPerCall;
  }

  /** Whether the inner store keeps a live fleet count itself. */
  get liveCount(): boolean {
    return this.#inner.heartbeat !== undefined;
  }

  /** Counts `op` and forwards it with the caller's `wait`, so a queued op its caller gave up on is dropped as without the census. */
  apply(op: BucketOp, wait?: CallerWait): Promise<BucketReply> {
    if (this.#inSync) {
      this.#sync++;
      this.#syncKeys += op.limits.length;
    } else if (op.take !== undefined || op.reserve !== undefined) this.#outOfBand++;
    else this.#refund++;
    return this.#inner.apply(op, wait);
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#inner.reset(key, limits);
  }

  heartbeat(instance: string, ttlMs: number): Promise<number> {
    this.#openSyncWindow();
    const inner = this.#inner;
    return inner.heartbeat === undefined ? Promise.resolve(this.#declared) : inner.heartbeat(instance, ttlMs);
  }

  census(): OpCensus {
    return {
      sync: this.#sync,
      outOfBand: this.#outOfBand,
      refund: this.#refund,
      syncs: this.#syncs,
      syncCalls: this.#syncCalls,
    };
  }

  #openSyncWindow(): void {
    if (this.#inSync) return;
    this.#inSync = true;
    this.#syncKeys = 0;
    let hops = 0;
    const hop = () => {
      if (++hops < SYNC_WINDOW_HOPS) {
        queueMicrotask(hop);
        return;
      }
      this.#inSync = false;
      if (this.#syncKeys > 0) {
        this.#syncs++;
        this.#syncCalls += Math.ceil(this.#syncKeys / this.#maxKeysPerCall);
      }
    };
    queueMicrotask(hop);
  }
}

/** The sum of several censuses. */
export function sumCensus(censuses: readonly OpCensus[]): OpCensus {
  const total = { sync: 0, outOfBand: 0, refund: 0, syncs: 0, syncCalls: 0 };
  for (const c of censuses) {
    total.sync += c.sync;
    total.outOfBand += c.outOfBand;
    total.refund += c.refund;
    total.syncs += c.syncs;
    total.syncCalls += c.syncCalls;
  }
  return total;
}

/** `after − before`, field by field. */
export function censusDelta(before: OpCensus, after: OpCensus): OpCensus {
  return {
    sync: after.sync - before.sync,
    outOfBand: after.outOfBand - before.outOfBand,
    refund: after.refund - before.refund,
    syncs: after.syncs - before.syncs,
    syncCalls: after.syncCalls - before.syncCalls,
  };
}
