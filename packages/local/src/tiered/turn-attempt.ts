import type { CallerWait } from '@tiered-limiter/core';
import { NOTHING_SENT, type StoreGuard } from '../guard/store-guard.js';

/**
 * One guarded attempt shared by the ops asked for in one turn of the event loop: each op still
 * takes its place in the refill queue as it is asked (a hand-back asked before a refill is sent
 * before it), but they share one timeout, one verdict and at most one `failure` event. Late grants
 * land together (a reply carries up to 64 ops), and each sent back under an attempt of its own
 * timed out behind the others on a healthy store whose process was busy: after `setLimits` on
 * 10,000 keys, 148 `failure` events in 1.5 s where the hand-backs of the drain itself cost one.
 */
export class TurnAttempt {
  /** Whether the store took every op of the turn; `false` when refused, failed or timed out. */
  readonly result: Promise<boolean>;
  /** The attempt's wait, to pass each op; `undefined` when the breaker refused the attempt. */
  #wait: CallerWait | undefined;
  /** Each op's outcome, settled as it answers: a failure before the turn is over is no unhandled rejection. */
  readonly #sent: Promise<PromiseSettledResult<unknown>>[] = [];
  #close!: () => void;

  constructor(guard: StoreGuard) {
    const closed = new Promise<void>((resolve) => (this.#close = resolve));
    // The guard calls this at once unless it refuses: the ops asked for in this turn join it.
    this.result = guard
      .run((wait) => {
        this.#wait = wait;
        return closed.then(() => everyAnswer(this.#sent));
      })
      .then((result) => result.ok);
  }

  /** The wait an op of this attempt is sent with; `undefined` when the breaker refused it (send nothing). */
  get wait(): CallerWait | undefined {
    return this.#wait;
  }

  /** An op of this attempt, queued: the attempt answers once it has. */
  add(sent: Promise<unknown>): void {
    this.#sent.push(
      sent.then(
        (value) => ({ status: 'fulfilled', value }),
        (reason: unknown) => ({ status: 'rejected', reason }),
      ),
    );
  }

  /** The turn is over: no op joins any more, and the attempt answers once those it has did. */
  close(): void {
    this.#close();
  }
}

/**
 * Resolves once all of `sent` answered, `NOTHING_SENT` when none of them sent anything (the
 * attempt was no probe of the store); rejects with the first failure in the order they were asked.
 */
function everyAnswer(sent: readonly Promise<PromiseSettledResult<unknown>>[]): Promise<unknown> {
  return Promise.all(sent).then((results) => {
    let sentSomething = false;
    for (const result of results) {
      if (result.status === 'rejected') throw result.reason;
      if (result.value !== NOTHING_SENT) sentSomething = true;
    }
    return sentSomething ? undefined : NOTHING_SENT;
  });
}
