import { EventEmitter } from 'node:events';
import {
  type CallerWait,
  CircuitOpenError,
  type Clock,
  StoreError,
  StoreTimeoutError,
} from '@tiered-limiter/core';
import { emitSafely } from '../emit-safely.js';
import { resolveGuardOptions } from './guard-options.js';
import {
  type BreakerState,
  type GuardEvents,
  type GuardResult,
  NOTHING_SENT,
  type StoreGuardOptions,
} from './guard-types.js';
import { StallLog } from './stall-log.js';

export type {
  BreakerOptions,
  BreakerState,
  GuardEvents,
  GuardResult,
  StoreGuardOptions,
} from './guard-types.js';
export { NOTHING_SENT } from './guard-types.js';

/**
 * How late, in ms, the timeout's timer may fire before the guard records a stall of its own event
 * loop (a busy loop, a long GC, the process descheduled): one that fires this much past its time
 * lengthens the budgets begun before it (`deadlineOf`) and says how late it ran in its error.
 */
const STALL_SUSPECT_MS = 2;

/**
 * Puts a timeout and a circuit breaker around calls to a shared store, and turns every
 * rejection into a `GuardResult` instead of a throw, so that no store failure reaches a
 * request. The per-request and two-tier limiters share this one guard rather than each
 * keeping a copy of the logic.
 *
 * @example
 * const guard = new StoreGuard({ timeoutMs: 20 });
 * const result = await guard.run(() => store.apply({ key: 'k', limits, take: 1 }));
 * if (!result.ok) console.warn(result.error.code); // ERR_TL_STORE_TIMEOUT, ERR_TL_CIRCUIT_OPEN, …
 */
export class StoreGuard extends EventEmitter<GuardEvents> {
  /** The timeout in force, in ms. */
  readonly timeoutMs: number;
  readonly #threshold: number;
  readonly #cooldownMs: number;
  readonly #breakerEnabled: boolean;
  readonly #clock: Clock;
  #state: BreakerState = 'closed';
  #consecutiveFailures = 0;
  readonly #stalls = new StallLog();
  /** When the last timeout that counted toward the streak fired. */
  #lastTimeoutAtMs = Number.NEGATIVE_INFINITY;
  #openedAtMs = 0;
  #downSinceMs = 0;
  #downTotalMs = 0;
  /** When the limiter's `close()` ended (`end()`): its degraded time stops there. */
  #endedAtMs: number | undefined;
  #failures = 0;
  #lastError: StoreError | undefined;
  /**
   * What a refused call resolves while the breaker is open, made once per failure that kept it
   * open: an error per refused call, each capturing its stack, took half the CPU of a process
   * making 150,000 decisions a second through an outage.
   */
  #refusal: Promise<GuardResult<never>> | undefined;

  constructor(options: StoreGuardOptions = {}) {
    super();
    const settings = resolveGuardOptions(options);
    this.timeoutMs = settings.timeoutMs;
    this.#breakerEnabled = settings.breakerEnabled;
    this.#threshold = settings.failureThreshold;
    this.#cooldownMs = settings.cooldownMs;
    this.#clock = settings.clock;
  }

  /** The breaker's state now. */
  get state(): BreakerState {
    return this.#state;
  }

  /** Whether the store is considered down (breaker open or probing). */
  get degraded(): boolean {
    return this.#state !== 'closed';
  }

  /** Whether a call made now would reach the store (breaker closed, or due for a probe). */
  get accepting(): boolean {
    if (this.#state === 'closed') return true;
    return this.#state === 'open' && this.#clock.now() - this.#openedAtMs >= this.#cooldownMs;
  }

  /**
   * When (`performance.now()`) a caller's budget over several calls, one timeout begun at
   * `startedAtMs`, runs out: lengthened by the stalls of this process seen since (by timeouts'
   * timers that ran late; a stall many saw counts once), as they were not the store's, and at least
   * as long again after a stall (up to the timeout) for the answers that waited in the socket and
   * one more call (`StallLog.deadline`).
   */
  deadlineOf(startedAtMs: number): number {
    return this.#stalls.deadline(startedAtMs, this.timeoutMs);
  }

  /** Store calls that failed or timed out since the guard was made. */
  get failures(): number {
    return this.#failures;
  }

  /** Milliseconds spent degraded since the guard was made, the current spell included. */
  get degradedMs(): number {
    if (this.#state === 'closed') return this.#downTotalMs;
    return this.#downTotalMs + Math.max(0, (this.#endedAtMs ?? this.#clock.now()) - this.#downSinceMs);
  }

  /**
   * The limiter's `close()` has ended: the current spell, if any, stops counting. A limiter closed
   * while its store was down went on adding to `degradedMs` (and the OTel counter
   * `tiered_limiter.degraded.time`) for as long as the process lived, though it made no calls.
   */
  end(): void {
    this.#endedAtMs ??= this.#clock.now();
  }

  /**
   * Re-emits this guard's `failure`, `degraded` and `recovered` events on `target` (a limiter), each
   * of its listeners called apart (`emitSafely`): one that throws is reported, not thrown here.
   */
  relayTo(target: Pick<EventEmitter, 'rawListeners'>): void {
    this.on('failure', (error) => emitSafely(target, 'failure', error));
    this.on('degraded', (error) => emitSafely(target, 'degraded', error));
    this.on('recovered', (info) => emitSafely(target, 'recovered', info));
  }

  /** Milliseconds until an open breaker lets its next probe through; 0 when closed. */
  msUntilProbe(): number {
    if (this.#state === 'closed') return 0;
    return Math.max(0, Math.ceil(this.#openedAtMs + this.#cooldownMs - this.#clock.now()));
  }

  /**
   * Runs `call` under the timeout and breaker: the one way to reach the store. `call` is not made
   * at all while the breaker refuses (build an op inside it, so that nothing it carries is taken
   * from the caller's books unless it is sent). Never rejects: a failure, a timeout or an open
   * breaker resolves `{ ok: false, error }`, and a failure is reported on the `failure` event. A
   * timeout gives the reply one more turn of the event loop (its poll phase) before it is called,
   * so that a reply this process had not yet read never counts against the store. `call` gets the
   * attempt's `CallerWait` to pass to `GlobalStore.apply`: an op still queued in the store when the
   * timeout gives up is dropped unsent. `refused`, if given, weighs the value first: a value it
   * refuses is a failure of the store's (a custom store's malformed reply), as a rejection is.
   */
  run<T>(
    call: (wait: CallerWait) => Promise<T>,
    refused?: (value: T) => StoreError | undefined,
  ): Promise<GuardResult<T>> {
    if (!this.accepting) {
      this.#refusal ??= Promise.resolve({ ok: false, error: new CircuitOpenError(this.#lastError) });
      return this.#refusal;
    }
    if (this.#state === 'open') this.#state = 'half-open';
    return this.#attempt(call, this.timeoutMs, refused);
  }

  /**
   * Runs `call` whatever the breaker says, under a timeout of its own: for `close()`, which
   * makes one last attempt to hand leased tokens back even right after a blip opened the breaker.
   */
  force<T>(call: (wait: CallerWait) => Promise<T>, timeoutMs: number): Promise<GuardResult<T>> {
    return this.#attempt(call, timeoutMs);
  }

  #attempt<T>(
    call: (wait: CallerWait) => Promise<T>,
    timeoutMs: number,
    refused?: (value: T) => StoreError | undefined,
  ): Promise<GuardResult<T>> {
    return new Promise<GuardResult<T>>((resolve) => {
      let settled = false;
      let lateMs = 0;
      // Told to the store: an op still queued when the timeout gives up on it is never sent.
      const wait = { gaveUp: false };
      const fail = () => {
        if (settled) return;
        settled = true;
        wait.gaveUp = true;
        resolve(this.#failed(new StoreTimeoutError(timeoutMs, lateMs)));
      };
      const due = performance.now() + timeoutMs;
      let firedAt: number | undefined;
      const timer = setTimeout(() => {
        // Timers run before the poll phase of a turn of the event loop: a reply that came while this
        // process was busy or descheduled waits unread in the socket, even when the stall ended before
        // the deadline and the timer runs on time. The poll phase reads it (immediates run after it)
        // before the store is blamed: a timeout only once the process has looked past the deadline.
        firedAt = performance.now();
        const late = firedAt - due;
        if (late > STALL_SUSPECT_MS) {
          lateMs = late;
          this.#stalls.record(due, firedAt);
        }
        setImmediate(fail);
      }, timeoutMs);
      // A limiter's timers never keep a process alive.
      timer.unref();
      const onValue = (value: T) => {
        if (value === NOTHING_SENT) {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          // The probe did not happen: the next call may probe at once.
          if (this.#state === 'half-open') this.#state = 'open';
          resolve({ ok: true, value });
          return;
        }
        if (settled) {
          // A late answer: the store is up, only slow (or this process stalled). It breaks the
          // streak of failures that opens the breaker, but leaves an open breaker open.
          if (this.#state === 'closed') this.#consecutiveFailures = 0;
          return;
        }
        // Read past its timer, before the verdict: the stall lasted till now. One in time reads no clock.
        const readAt = firedAt === undefined ? due : performance.now();
        if (readAt - due > STALL_SUSPECT_MS) this.#stalls.record(due, readAt);
        // Weighed here, in the reaction the answer already has: on a request's path, not a promise more.
        const refusal = refused?.(value);
        if (refusal !== undefined) return onError(refusal);
        settled = true;
        clearTimeout(timer);
        this.#succeeded();
        resolve({ ok: true, value });
      };
      const onError = (cause: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(
          this.#failed(cause instanceof StoreError ? cause : new StoreError(messageOf(cause), { cause })),
        );
      };
      try {
        call(wait).then(onValue, onError);
      } catch (cause) {
        onError(cause);
      }
    });
  }

  #succeeded(): void {
    this.#consecutiveFailures = 0;
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    const now = this.#clock.now();
    const downMs = Math.max(0, now - this.#downSinceMs);
    this.#downTotalMs += Math.max(0, Math.min(now, this.#endedAtMs ?? now) - this.#downSinceMs);
    emitSafely(this, 'recovered', { downMs });
  }

  /**
   * Adds `error` to the streak that opens the breaker. Timeouts that fire within `timeoutMs` of
   * the last one counted count once: a stall of this process, or one slow moment of the store,
   * times out every call in flight together, and on 2 busy cores that opened the breaker several
   * times a second while every call was being answered (46 % of a row's decisions by policy).
   */
  #countFailure(error: StoreError): void {
    if (error instanceof StoreTimeoutError) {
      const now = this.#clock.now();
      if (this.#consecutiveFailures > 0 && now - this.#lastTimeoutAtMs < this.timeoutMs) return;
      this.#lastTimeoutAtMs = now;
    }
    this.#consecutiveFailures++;
  }

  #failed(error: StoreError): GuardResult<never> {
    this.#lastError = error;
    this.#refusal = undefined;
    this.#failures++;
    this.#countFailure(error);
    emitSafely(this, 'failure', error);
    if (!this.#breakerEnabled) return { ok: false, error };
    if (this.#state === 'half-open') {
      this.#state = 'open';
      this.#openedAtMs = this.#clock.now();
    } else if (this.#state === 'closed' && this.#consecutiveFailures >= this.#threshold) {
      this.#state = 'open';
      this.#openedAtMs = this.#clock.now();
      this.#downSinceMs = this.#openedAtMs;
      emitSafely(this, 'degraded', error);
    }
    return { ok: false, error };
  }
}

function messageOf(cause: unknown): string {
  return `store call failed: ${cause instanceof Error ? cause.message : String(cause)}`;
}
