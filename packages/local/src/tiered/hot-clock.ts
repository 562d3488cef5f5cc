import {
  acquireSharedClock,
  releaseSharedClock,
  type SharedClock,
  touchSharedClock,
} from './shared-clock.js';

/**
 * Hot-path decisions a second from which a limiter reads the shared clock thread. The thread
 * wakes every millisecond, and on a 2-core VM each wake-up cost 20–40 µs of CPU: 2–4 % of a core,
 * what 300,000–570,000 `performance.now()` calls (70 ns each there) cost. Below this rate the
 * thread cost a limiter more than it saved; an idle limiter with it used 30–47 ms of CPU a second.
 */
export const CLOCK_THREAD_FROM_PER_SECOND = 250_000;
/** Hot-path decisions a second below which a limiter lets the shared clock thread go. */
export const CLOCK_THREAD_UNTIL_PER_SECOND = 100_000;

/** Where a `HotClock` gets the shared clock from and gives it back: the process's, or a test's. */
export interface ClockSource {
  acquire(): SharedClock | undefined;
  release(): void;
}

const PROCESS_CLOCK: ClockSource = { acquire: acquireSharedClock, release: releaseSharedClock };

/** Whether a limiter holds the shared clock: what the finalizer of a limiter never closed releases. */
export interface ClockHold {
  held: boolean;
}

/**
 * The clock a two-tier limiter's hot path reads. A process's shared clock thread turns each read
 * into a memory load, at the CPU of a thread waking every millisecond; so a limiter reads
 * `performance.now()` until its hot path is busy enough for the thread to pay, joins the thread
 * then, and leaves it when it is quiet again (`review`, at each tick of its lease book, or from
 * the hot path every few thousand clock reads: `BookRounds.catchUp`). The
 * two rates are apart so that a load near one of them does not start and stop the thread at
 * every tick, and the slot is read only once the thread has written it (a review, or `adopt`, after it runs).
 * Either clock is right while the event loop is blocked; the thread's is up to a few ms behind,
 * which the store's grace covers (docs/ACCURACY.md, A2).
 */
export class HotClock {
  /** The shared clock's slot while this limiter holds it and its worker runs; `undefined`: read the limiter's clock. */
  view: Float64Array | undefined;
  /** What the finalizer sees: the limiter holds the shared clock. */
  readonly hold: ClockHold = { held: false };
  readonly #allowed: boolean;
  readonly #decisionsSoFar: () => number;
  readonly #source: ClockSource;
  /** The shared clock while held: its slot is read once its worker has written the time. */
  #shared: SharedClock | undefined;
  #decisions = 0;
  #atMs: number;

  /**
   * `decisionsSoFar` counts the hot path's decisions since the limiter was made. `allowed` false
   * (a clock of the caller's, or `exactClock`): the limiter's clock, always.
   */
  constructor(allowed: boolean, nowMs: number, decisionsSoFar: () => number, source = PROCESS_CLOCK) {
    this.#allowed = allowed;
    this.#atMs = nowMs;
    this.#decisionsSoFar = decisionsSoFar;
    this.#source = source;
  }

  /**
   * `review(nowMs)` unless the last review is less than `gapMs` old: a rate weighed over a shorter
   * window is noise (a few decisions after a review let the thread go).
   */
  reviewUnlessWithin(nowMs: number, gapMs: number): void {
    if (nowMs - this.#atMs >= gapMs) this.review(nowMs);
  }

  /**
   * Weighs the hot path's decisions since the last review, at `nowMs`: joins the shared clock
   * when their rate reached `CLOCK_THREAD_FROM_PER_SECOND`, leaves it when it fell below
   * `CLOCK_THREAD_UNTIL_PER_SECOND`.
   */
  review(nowMs: number): void {
    const elapsedMs = nowMs - this.#atMs;
    if (elapsedMs <= 0) return;
    const decisions = this.#decisionsSoFar();
    const perSecond = ((decisions - this.#decisions) * 1000) / elapsedMs;
    this.#decisions = decisions;
    this.#atMs = nowMs;
    if (this.hold.held) {
      if (perSecond < CLOCK_THREAD_UNTIL_PER_SECOND) {
        this.release();
        return;
      }
      touchSharedClock();
    } else if (this.#allowed && perSecond >= CLOCK_THREAD_FROM_PER_SECOND) {
      this.#shared = this.#source.acquire();
      this.hold.held = true;
    }
    this.#readShared();
  }

  /** Reads the shared clock's slot from now on if this limiter joined it and its worker now writes the time. */
  adopt(): void {
    if (this.hold.held) this.#readShared();
  }

  /** Reads the shared clock's slot from now on, once its worker has written the time (`SharedClock.running`). */
  #readShared(): void {
    const shared = this.#shared;
    if (this.view === undefined && shared !== undefined && shared.running()) this.view = shared.view;
  }

  /** Leaves the shared clock, if held (a quiet hot path, or `close()`). */
  release(): void {
    if (!this.hold.held) return;
    this.hold.held = false;
    this.view = undefined;
    this.#shared = undefined;
    this.#source.release();
  }
}
