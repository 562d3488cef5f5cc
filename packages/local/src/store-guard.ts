import { EventEmitter } from 'node:events';
import {
  assertInteger,
  CircuitOpenError,
  type Clock,
  ConfigError,
  StoreError,
  StoreTimeoutError,
} from '@tiered-limiter/core';
import { DEFAULT_COOLDOWN_MS, DEFAULT_FAILURE_THRESHOLD, DEFAULT_TIMEOUT_MS } from './guard-defaults.js';

/** Options of the circuit breaker inside a `StoreGuard`. */
export interface BreakerOptions {
  /**
   * Consecutive failed or timed-out store calls that open the breaker. While it is open no
   * request pays a timeout: the failure policy decides at once.
   * @default 3
   */
  failureThreshold?: number;
  /**
   * Milliseconds an open breaker waits before letting one probe call through. The first
   * call that succeeds closes it, so recovery takes at most this long after the store is back.
   * @default 250
   */
  cooldownMs?: number;
}

/** Options of `StoreGuard`, shared by every limiter that calls a `GlobalStore`. */
export interface StoreGuardOptions {
  /**
   * Milliseconds a store call may take before it counts as failed, whatever the client is
   * doing (reconnecting, queueing). The request then gets its policy's decision.
   * @default 20
   */
  timeoutMs?: number;
  /** The circuit breaker, or `false` for none (every call then waits up to the timeout). */
  breaker?: BreakerOptions | false;
  /** Clock for the breaker's cooldown. @default performance */
  clock?: Clock;
}

/** The outcome of a guarded store call: a value, or the failure that the policy must handle. */
export type GuardResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: StoreError };

/** The breaker's state: `closed` calls go through, `open` none do, `half-open` one probe does. */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** Events a `StoreGuard` emits; limiters re-emit them. */
export interface GuardEvents {
  /** A store call failed or timed out (every one, breaker open or not). */
  failure: [error: StoreError];
  /** The breaker opened: the store is considered down, limits decide by their policy. */
  degraded: [error: StoreError];
  /** The store answered again after being degraded, `downMs` after it went down. */
  recovered: [info: { downMs: number }];
}

/**
 * Puts a timeout and a circuit breaker around calls to a shared store, and turns every
 * rejection into a `GuardResult` instead of a throw, so that no store failure reaches a
 * request. The per-request and two-tier limiters share this one guard rather than each
 * keeping a copy of the logic.
 *
 * @example
 * const guard = new StoreGuard({ timeoutMs: 20 });
 * const result = await guard.run(() => store.take('k', limits, 1));
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
  #openedAtMs = 0;
  #downSinceMs = 0;
  #downTotalMs = 0;
  #failures = 0;
  #lastError: StoreError | undefined;

  constructor(options: StoreGuardOptions = {}) {
    super();
    this.timeoutMs = assertInteger('timeoutMs', options.timeoutMs ?? DEFAULT_TIMEOUT_MS, 1, 60_000);
    const breaker = options.breaker ?? {};
    if (breaker !== false && (breaker === null || typeof breaker !== 'object')) {
      throw new ConfigError('breaker', breaker, 'an object or false');
    }
    this.#breakerEnabled = breaker !== false;
    const b = breaker === false ? {} : breaker;
    this.#threshold = assertInteger(
      'breaker.failureThreshold',
      b.failureThreshold ?? DEFAULT_FAILURE_THRESHOLD,
      1,
      1000,
    );
    this.#cooldownMs = assertInteger('breaker.cooldownMs', b.cooldownMs ?? DEFAULT_COOLDOWN_MS, 1, 600_000);
    this.#clock = options.clock ?? performance;
  }

  /** The breaker's state now. */
  get state(): BreakerState {
    return this.#state;
  }

  /** Whether the store is considered down (breaker open or probing). */
  get degraded(): boolean {
    return this.#state !== 'closed';
  }

  /**
   * The failure a call made now would get without reaching the store (breaker open and not
   * yet time to probe), or `undefined` when a call would go through. Lets a hot path decide
   * synchronously instead of awaiting a promise that is already settled.
   */
  refusal(): StoreError | undefined {
    return this.accepting ? undefined : new CircuitOpenError(this.#lastError);
  }

  /** Whether a call made now would reach the store (breaker closed, or due for a probe). */
  get accepting(): boolean {
    if (this.#state === 'closed') return true;
    return this.#state === 'open' && this.#clock.now() - this.#openedAtMs >= this.#cooldownMs;
  }

  /** Store calls that failed or timed out since the guard was made. */
  get failures(): number {
    return this.#failures;
  }

  /** Milliseconds spent degraded since the guard was made, the current spell included. */
  get degradedMs(): number {
    return this.#downTotalMs + (this.#state === 'closed' ? 0 : this.#clock.now() - this.#downSinceMs);
  }

  /** Re-emits this guard's `failure`, `degraded` and `recovered` events on `target` (a limiter). */
  relayTo(target: EventEmitter<GuardEvents>): void {
    this.on('failure', (error) => target.emit('failure', error));
    this.on('degraded', (error) => target.emit('degraded', error));
    this.on('recovered', (info) => target.emit('recovered', info));
  }

  /** Milliseconds until an open breaker lets its next probe through; 0 when closed. */
  msUntilProbe(): number {
    if (this.#state === 'closed') return 0;
    return Math.max(0, Math.ceil(this.#openedAtMs + this.#cooldownMs - this.#clock.now()));
  }

  /**
   * Runs `call` under the timeout and breaker. Never rejects: a failure, a timeout or an open
   * breaker resolves `{ ok: false, error }`, and is reported on the `failure` event.
   */
  run<T>(call: () => Promise<T>): Promise<GuardResult<T>> {
    const refused = this.refusal();
    if (refused) return Promise.resolve({ ok: false, error: refused });
    if (this.#state === 'open') this.#state = 'half-open';
    return new Promise<GuardResult<T>>((resolve) => {
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        resolve(this.#failed(new StoreTimeoutError(this.timeoutMs)));
      }, this.timeoutMs);
      // A limiter's timers never keep a process alive.
      timer.unref();
      const onValue = (value: T) => {
        if (settled) return;
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
        call().then(onValue, onError);
      } catch (cause) {
        onError(cause);
      }
    });
  }

  #succeeded(): void {
    this.#consecutiveFailures = 0;
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    const downMs = Math.max(0, this.#clock.now() - this.#downSinceMs);
    this.#downTotalMs += downMs;
    this.emit('recovered', { downMs });
  }

  #failed(error: StoreError): GuardResult<never> {
    this.#lastError = error;
    this.#failures++;
    this.#consecutiveFailures++;
    this.emit('failure', error);
    if (!this.#breakerEnabled) return { ok: false, error };
    if (this.#state === 'half-open') {
      this.#state = 'open';
      this.#openedAtMs = this.#clock.now();
    } else if (this.#state === 'closed' && this.#consecutiveFailures >= this.#threshold) {
      this.#state = 'open';
      this.#openedAtMs = this.#clock.now();
      this.#downSinceMs = this.#openedAtMs;
      this.emit('degraded', error);
    }
    return { ok: false, error };
  }
}

function messageOf(cause: unknown): string {
  return `store call failed: ${cause instanceof Error ? cause.message : String(cause)}`;
}
