import { drainLease, type Lease } from './lease.js';
import { owes } from './lease-reports.js';
import type { Refiller } from './refiller.js';

/**
 * What leases owe the store on their way out of the lease book: settles in flight (an eviction,
 * a `block`, new limits), leases whose settle the breaker refused, kept to be sent again once the
 * store answers, and grants that land for a lease already gone. `close()` waits on all of it.
 */
export class Settlements {
  /** Settles and hand-backs sent and not answered yet. */
  readonly #pending = new Set<Promise<unknown>>();
  /**
   * Detached leases whose settle was refused, and leases in the table whose optimistic charge was:
   * at most `maxKeys`, one entry a key.
   */
  readonly #owing = new Set<Lease>();
  readonly #refiller: Refiller;
  readonly #maxKeys: number;
  /** Called when a lease starts owing: the book's timer must tick to send it again. */
  readonly #onOwing: () => void;
  /** Whether the owing leases' attempt is still out: a tick while it is sends nothing more. */
  #retrying = false;
  /** While `close()` runs: how much of its wait is left, in ms. */
  #closingWait: (() => number) | undefined;

  constructor(refiller: Refiller, maxKeys: number, onOwing: () => void) {
    this.#refiller = refiller;
    this.#maxKeys = maxKeys;
    this.#onOwing = onOwing;
  }

  /** Whether no lease waits to send again what it owes. */
  get settled(): boolean {
    return this.#owing.size === 0;
  }

  /**
   * Sends what `lease` owes (its spends and hand-backs; a carrier's to the buckets of its limits),
   * under the attempt this turn's settles share; kept to be sent again if refused.
   */
  settle(lease: Lease): void {
    const settle = this.#refiller.settler.settleInTurn(lease);
    this.#pending.add(settle);
    void settle.then((ok) => {
      this.#pending.delete(settle);
      // Refused (the breaker is open): keep what it owes and try again once the store answers.
      // Each key is one entry (its hand-backs summed in its grants), as many as the table holds
      // at most; a lease that owes nothing (a key first seen during the outage) is not kept.
      const owing = owes(lease) || lease.debt > 0;
      if (!ok && owing && lease.detached && this.#owing.size < this.#maxKeys) {
        this.#owing.add(lease);
        this.#onOwing();
      } else if (ok) this.#owing.delete(lease);
    });
  }

  /**
   * An optimistic charge the breaker refused, of `lease` still in the table: kept to be sent again
   * once the store answers. Left on the lease for the key's next op, a quiet key's charge waited
   * until it was evicted or the limiter closed (10 s of fake time after the store was back, unsent).
   */
  chargeRefused(lease: Lease): void {
    if (this.#owing.size >= this.#maxKeys) return;
    this.#owing.add(lease);
    this.#onOwing();
  }

  /**
   * Sends what `carriers` (of limits `setLimits` replaced) owe in one guarded attempt; those the
   * breaker refused are kept, to be sent again to their own buckets once the store answers.
   */
  settleAll(carriers: readonly Lease[]): void {
    if (carriers.length === 0) return;
    const settle = this.#refiller.settler.settleMany(carriers);
    this.#pending.add(settle);
    void settle.then((ok) => {
      this.#pending.delete(settle);
      if (ok) return;
      // A refusal built no op: what they owe is still on them. What a failed op carried has left.
      for (const carrier of carriers) {
        if (this.#owing.size >= this.#maxKeys) break;
        if (owes(carrier)) this.#owing.add(carrier);
      }
      if (this.#owing.size > 0) this.#onOwing();
    });
  }

  /**
   * A tick: every lease still owing tries again, all in one guarded attempt. A settle each cost a
   * refused call per key and tick while the breaker stayed open (10,000 kept keys: 330,000 a second),
   * and once Redis answered, 10,000 timers that timed out together behind one another: a `failure`
   * each, and the breaker opened again on a healthy store, tick after tick, while the keys whose op
   * had not left the refill queue stayed owing.
   */
  retry(): void {
    if (this.#owing.size === 0 || this.#retrying) return;
    const leases = [...this.#owing];
    this.#retrying = true;
    const retry = this.#refiller.settler.settleMany(leases);
    this.#pending.add(retry);
    void retry.then(() => {
      this.#pending.delete(retry);
      this.#retrying = false;
      // What left in an op is the store's now (it lands, or is counted unreported); a refusal sent none.
      for (const lease of leases) if (!owes(lease) && lease.debt === 0) this.#owing.delete(lease);
    });
  }

  /**
   * A grant of `leased` tokens landed for a lease no longer in use (detached, or blocked): it goes
   * straight back, past the breaker while closing (a blip that opened it must not cost a late grant),
   * within what is left of close()'s wait but no less than the guard's timeout: once the wait was
   * over, a store that answered a grant was given 1 ms for its hand-back and reported as failing.
   * The grants landing in one turn go back under one attempt, as every settle does: while closing
   * too, where each had a timer and a `failure` event of its own.
   */
  lateGrant(lease: Lease, leased: number): void {
    if (leased <= 0) return;
    drainLease(lease);
    const closingWait = this.#closingWait;
    if (closingWait === undefined) {
      this.settle(lease);
      return;
    }
    const settler = this.#refiller.settler;
    this.#pending.add(settler.handBackInTurn(lease, Math.max(closingWait(), settler.timeoutMs)));
  }

  /**
   * `close()` begins: `leases` and those still owing are detached and drained, and returned to be
   * handed back (`handBack`); from here on, a late grant goes back past the breaker within `waitMs()`.
   */
  closing(leases: readonly Lease[], waitMs: () => number): Lease[] {
    this.#closingWait = waitMs;
    const owed = [...leases, ...this.#owing];
    this.#owing.clear();
    for (const lease of owed) {
      lease.detached = true;
      drainLease(lease);
    }
    return owed;
  }

  /** One hand-back of what `leases` owe, past the breaker, within `waitMs`; resolves whether the store took it all. */
  handBack(leases: readonly Lease[], waitMs: number): Promise<boolean> {
    const handBack = this.#refiller.settler.handBack(leases, waitMs);
    this.#pending.add(handBack);
    return handBack;
  }

  /** Resolves once nothing is pending, what is added while it waits included. */
  async drained(): Promise<void> {
    while (this.#pending.size > 0) {
      const now = [...this.#pending];
      await Promise.allSettled(now);
      for (const settle of now) this.#pending.delete(settle);
    }
  }
}
