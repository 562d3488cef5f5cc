import type { Lease } from './lease.js';

/**
 * Optimistic cold start's charges, gathered per callback: every lease charged while one callback
 * runs (a timer's, a socket read's, an immediate's) goes to the store once it returns, in one
 * guarded attempt and one place in the refill queue (the store still gathers the ops into calls).
 * A settle per key cost each a timer and a queue entry: 100,000 new keys at 256 in flight queued
 * charges past the timeout, each timeout a failure, and the breaker opened on a healthy store.
 * They leave from a promise job, so they reach the store before it sends what the same callback
 * asked for (it flushes once the promise jobs are done) and share its call: sent a turn later (an
 * immediate), they made a call of their own, a third of an optimistic limiter's calls at a steady
 * 25,000 decisions a second on Zipf keys. `pending` counts the charges gathered and those sent
 * and not yet answered, for the cold path to stop giving credit while too many wait.
 */
export class TurnCharges {
  /**
   * Sends what the leases owe, calling `sending` as the ops leave the refill queue; resolves once
   * the store has answered (or refused) them all.
   */
  readonly #send: (leases: readonly Lease[], sending: () => void) => Promise<void>;
  readonly #gathered = new Set<Lease>();
  #scheduled = false;
  #sent = 0;

  constructor(send: (leases: readonly Lease[], sending: () => void) => Promise<void>) {
    this.#send = send;
  }

  /** Charges what optimistic cold start admitted on `lease` (its `debt`) once this callback returns. */
  add(lease: Lease): void {
    this.#gathered.add(lease);
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      const leases = [...this.#gathered];
      this.#gathered.clear();
      let sent = false;
      const sending = () => {
        sent = true;
        this.#sent += leases.length;
      };
      void this.#send(leases, sending).then(() => {
        if (sent) this.#sent -= leases.length;
      });
    });
  }

  /** Charges gathered, or sent and not yet answered. */
  get pending(): number {
    return this.#gathered.size + this.#sent;
  }
}
