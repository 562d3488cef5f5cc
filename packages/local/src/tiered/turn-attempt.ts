import type { CallerWait } from '@tiered-limiter/core';
import type { GuardResult } from '../guard/guard-types.js';
import { NOTHING_SENT } from '../guard/store-guard.js';
import { allAnswered } from './all-answered.js';

/** How a `TurnAttempt` is guarded: `StoreGuard.run`, or `force` with close()'s wait. */
export type Guarded = (attempt: (wait: CallerWait) => Promise<unknown>) => Promise<GuardResult<unknown>>;

/**
 * One guarded attempt shared by the ops asked for in one turn of the event loop: each op is still
 * sent as it is asked (a hand-back asked before a refill takes its place in the queue before it),
 * but they share one timeout, one verdict and at most one `failure` event. Late grants land
 * together (a reply carries up to 64 ops), and each sent back under an attempt of its own timed
 * out behind the others on a healthy store whose process was busy: after `setLimits` on 10,000
 * keys, 148 `failure` events in 1.5 s where the hand-backs of the drain itself cost one.
 */
export class TurnAttempt {
  /** Whether the store took every op of the turn; `false` when refused, failed or timed out. */
  readonly result: Promise<boolean>;
  /** The attempt's wait, to pass each op; `undefined` when the breaker refused the attempt. */
  #wait: CallerWait | undefined;
  readonly #sent: Promise<void>[] = [];
  /** Whether an op sent something: an attempt whose ops all had nothing to send was no probe of the store. */
  #sentSomething = false;
  #close!: () => void;

  constructor(guarded: Guarded) {
    const closed = new Promise<void>((resolve) => (this.#close = resolve));
    // The guard calls this at once unless it refuses: the ops asked for in this turn join it.
    this.result = guarded((wait) => {
      this.#wait = wait;
      return closed
        .then(() => allAnswered(this.#sent))
        .then(() => (this.#sentSomething ? undefined : NOTHING_SENT));
    }).then((result) => result.ok);
  }

  /** The wait an op of this attempt is sent with; `undefined` when the breaker refused it (send nothing). */
  get wait(): CallerWait | undefined {
    return this.#wait;
  }

  /** An op of this attempt, queued: the attempt answers once it has. */
  add(sent: Promise<unknown>): void {
    const answered = sent.then((value) => {
      if (value !== NOTHING_SENT) this.#sentSomething = true;
    });
    // Handled now, read once the turn is over: a failure before then is no unhandled rejection.
    answered.catch(() => {});
    this.#sent.push(answered);
  }

  /** The turn is over: no op joins any more, and the attempt answers once those it has did. */
  close(): void {
    this.#close();
  }
}
