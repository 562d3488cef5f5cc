import type { BucketReply } from '@tiered-limiter/core';
import type { GuardResult } from '../guard/store-guard.js';
import type { Lease } from './lease.js';

/** A periodic sync waiting to be sent, and the call its lease's waiters join. */
export interface PendingSync {
  readonly lease: Lease;
  readonly want: number;
  /** Sync intervals the grant lives (`Ask.spans`). */
  readonly spans: number;
  readonly call: Promise<GuardResult<BucketReply>>;
  readonly resolve: (result: GuardResult<BucketReply>) => void;
}

/**
 * The syncs a round's slice made, waiting to leave together (`Refiller.sendSyncs`). Each gives
 * its lease a call at once, for requests on the key to join as they would a refill in flight.
 */
export class SyncBatch {
  #syncs: PendingSync[] = [];

  /** Adds `lease`'s sync of `want` tokens living `spans` intervals, unless a call is already out for it. */
  add(lease: Lease, want: number, spans: number): void {
    if (lease.refill !== undefined) return;
    let resolve!: (result: GuardResult<BucketReply>) => void;
    const call = new Promise<GuardResult<BucketReply>>((r) => (resolve = r));
    lease.refill = call;
    this.#syncs.push({ lease, want, spans, call, resolve });
  }

  /** The syncs added since the last `take()`; the batch starts empty again. */
  take(): PendingSync[] {
    const syncs = this.#syncs;
    this.#syncs = [];
    return syncs;
  }
}

/**
 * Ends `sync`'s call with `result`: its lease may ask again. A call already ended keeps its first
 * result (a promise settles once), and a lease that has a newer call keeps it.
 */
export function finish(sync: PendingSync, result: GuardResult<BucketReply>): void {
  if (sync.lease.refill === sync.call) sync.lease.refill = undefined;
  sync.resolve(result);
}
