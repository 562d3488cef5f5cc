import { EventEmitter } from 'node:events';
import {
  allowDecision,
  assertCost,
  assertKey,
  assertLimits,
  assertStore,
  type Clock,
  ClosedError,
  ConfigError,
  type Decision,
  denyDecision,
  type GlobalStore,
  type LimitSpec,
  shadowOf,
  smallestCapacity,
  type TakeReply,
} from '@tiered-limiter/core';
import { FailurePolicyDecider, type FailurePolicyOptions } from './failure-policy.js';
import { type GuardEvents, StoreGuard, type StoreGuardOptions } from './store-guard.js';

/** Options of `RequestLimiter`. */
export interface RequestLimiterOptions extends StoreGuardOptions, FailurePolicyOptions {
  /** The shared store every instance asks, e.g. a `RedisStore`. */
  store: GlobalStore;
  /** The limit, or several limits checked all-or-nothing (e.g. 10 per second and 1,000 per hour). */
  limits: LimitSpec | readonly LimitSpec[];
  /**
   * Shadow mode: decide and report, but admit everything (`decision.shadowDenied` tells
   * what would have been denied), to watch a new limit before enforcing it.
   * @default false
   */
  shadow?: boolean;
}

/** Counters of a `RequestLimiter` since it was made. */
export interface RequestLimiterStats {
  /** Decisions by the tier that made them. */
  readonly decisions: { readonly global: number; readonly fallback: number };
  /** Decisions that admitted. */
  readonly allowed: number;
  /** Decisions that denied (shadow-mode denials included: they are what the limit decided). */
  readonly denied: number;
  /** Calls sent to the store. */
  readonly storeCalls: number;
  /** Store calls that failed or timed out. */
  readonly storeFailures: number;
  /** Milliseconds spent degraded (store considered down), the current spell included. */
  readonly fallbackMs: number;
}

/**
 * The per-request tier: every decision is one atomic store call (one EVALSHA on Redis), so
 * the shared limit is exact, at the cost of a round trip per request. A store that fails,
 * times out (`timeoutMs`, default 20 ms) or is behind an open breaker never throws into the
 * request: the limit's declared `failurePolicy` decides, and the `failure`, `degraded` and
 * `recovered` events report it.
 *
 * @example
 * const limiter = new RequestLimiter({ store: new MemoryStore(), limits: perSecond(10), failurePolicy: 'open' });
 * const decision = await limiter.consume('user:42');
 * if (!decision.allowed) console.log(`retry in ${decision.retryAfterMs} ms`);
 */
export class RequestLimiter extends EventEmitter<GuardEvents> {
  /** The limits, all-or-nothing. */
  readonly limits: readonly LimitSpec[];
  readonly #store: GlobalStore;
  readonly #guard: StoreGuard;
  readonly #policy: FailurePolicyDecider;
  readonly #maxCost: number;
  readonly #shadow: boolean;
  #closed = false;
  #global = 0;
  #fallback = 0;
  #allowed = 0;
  #denied = 0;
  #storeCalls = 0;

  constructor(options: RequestLimiterOptions) {
    super();
    if (options === null || typeof options !== 'object')
      throw new ConfigError('options', options, 'an object');
    const clock: Clock = options.clock ?? performance;
    this.#store = assertStore(options.store);
    this.limits = assertLimits('limits', options.limits);
    this.#maxCost = smallestCapacity(this.limits);
    this.#policy = new FailurePolicyDecider(options, this.limits, clock);
    this.#shadow = options.shadow ?? false;
    this.#guard = new StoreGuard({ ...options, clock });
    this.#guard.relayTo(this);
  }

  /** The declared failure policy. */
  get failurePolicy() {
    return this.#policy.policy;
  }

  /** Whether the store is considered down (the breaker is open or probing). */
  get degraded(): boolean {
    return this.#guard.degraded;
  }

  /**
   * Takes `cost` tokens for `key` with one store call. Resolves a `Decision`, never rejects
   * for a store failure; throws at once for a key that is not a string, a cost that is not
   * a whole number from 1 to the smallest capacity, or a closed limiter.
   */
  consume(key: string, cost = 1): Promise<Decision> {
    if (this.#closed) throw new ClosedError('RequestLimiter');
    assertKey(key);
    assertCost(cost, this.#maxCost);
    const refused = this.#guard.refusal();
    if (refused) return Promise.resolve(this.#count(this.#policy.decide(key, cost, refused)));
    return this.#ask(key, cost);
  }

  async #ask(key: string, cost: number): Promise<Decision> {
    this.#storeCalls++;
    const result = await this.#guard.run(() => this.#store.take(key, this.limits, cost));
    if (!result.ok) return this.#count(this.#policy.decide(key, cost, result.error));
    return this.#count(fromTake(result.value, this.limits));
  }

  /** Counters since the limiter was made. */
  stats(): RequestLimiterStats {
    return {
      decisions: { global: this.#global, fallback: this.#fallback },
      allowed: this.#allowed,
      denied: this.#denied,
      storeCalls: this.#storeCalls,
      storeFailures: this.#guard.failures,
      fallbackMs: this.#guard.degradedMs,
    };
  }

  /** Stops the limiter; later calls throw `ClosedError`. The store is the caller's to close. */
  close(): Promise<void> {
    this.#closed = true;
    this.removeAllListeners();
    this.#guard.removeAllListeners();
    return Promise.resolve();
  }

  #count(decision: Decision): Decision {
    if (decision.tier === 'global') this.#global++;
    else this.#fallback++;
    if (decision.allowed) this.#allowed++;
    else this.#denied++;
    return this.#shadow ? shadowOf(decision) : decision;
  }
}

function fromTake(reply: TakeReply, limits: readonly LimitSpec[]): Decision {
  const spec = limits.find((l) => l.capacity === reply.limit) ?? limits[0]!;
  return reply.allowed
    ? allowDecision(reply.remaining, reply.resetMs, spec, 'global')
    : denyDecision(reply.retryAfterMs, reply.remaining, reply.resetMs, spec, 'global');
}
