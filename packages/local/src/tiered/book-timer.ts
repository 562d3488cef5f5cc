import type { Clock } from '@tiered-limiter/core';

/**
 * A lease book's timer: runs `run(owner)` when due, and again after the delay it returns, until
 * `stop()`, or until the owner is garbage-collected, for it holds the owner only through a
 * `WeakRef` (a dropped limiter must still be collected, and its finalizer stops the timer). Never
 * keeps a process alive.
 */
export class BookTimer<Owner extends object> {
  readonly #owner: WeakRef<Owner>;
  /** Called with the owner at each tick; returns the ms to the next. Must not hold the owner. */
  readonly #run: (owner: Owner) => number;
  readonly #clock: Clock;
  #handle: NodeJS.Timeout | undefined;
  #nextAtMs = 0;
  #running = true;
  /** While `run` is under way: the delay it returns sets the next tick. */
  #firing = false;

  /**
   * `run` must be a function that does not close over the owner (a static method): V8 gives every
   * closure of one scope the same context, so an arrow made in the owner's constructor beside one
   * that uses `this` holds the owner strongly.
   */
  constructor(owner: Owner, run: (owner: Owner) => number, clock: Clock, firstMs: number) {
    this.#owner = new WeakRef(owner);
    this.#run = run;
    this.#clock = clock;
    this.#arm(firstMs);
  }

  /** Whether it still ticks (not stopped). */
  get running(): boolean {
    return this.#running;
  }

  /** When the next tick is due, on the clock it was made with. */
  get nextAtMs(): number {
    return this.#nextAtMs;
  }

  /** Brings the next tick forward to `ms` from now, if it is due later. */
  bringForward(ms: number): void {
    if (!this.#running || this.#firing) return;
    if (this.#nextAtMs <= this.#clock.now() + ms) return;
    clearTimeout(this.#handle);
    this.#arm(ms);
  }

  /** Stops it for good. */
  stop(): void {
    this.#running = false;
    clearTimeout(this.#handle);
    this.#handle = undefined;
  }

  #arm(ms: number): void {
    this.#nextAtMs = this.#clock.now() + ms;
    this.#handle = setTimeout(() => this.#fire(), ms);
    this.#handle.unref();
  }

  #fire(): void {
    const owner = this.#owner.deref();
    if (owner === undefined || !this.#running) return;
    this.#firing = true;
    let nextMs: number;
    try {
      nextMs = this.#run(owner);
    } finally {
      this.#firing = false;
    }
    if (this.#running) this.#arm(nextMs);
  }
}
