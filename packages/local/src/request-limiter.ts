import { EventEmitter } from 'node:events';
import type { BucketOp, Clock, Decision, Limiter, LimiterEvents, LimitSpec } from '@tiered-limiter/core';
import { ClosedError, ConfigError, denyDecision, internal } from '@tiered-limiter/core';
import { assertBlockMs, BlockList } from './block-list.js';
import { DenialMemory } from './denial-memory.js';
import { decisionOf, GuardedStore, STORE_LIMITER_OPTION_NAMES } from './guard/guarded-store.js';
import { InFlight } from './in-flight.js';
import { assertTokens } from './management.js';
import type { RequestLimiterOptions, RequestLimiterStats } from './request-limiter-types.js';
import { resolveMaxKeys } from './table.js';

export type { RequestLimiterOptions, RequestLimiterStats } from './request-limiter-types.js';

const {
  assertBoolean,
  assertClock,
  assertCost,
  assertKey,
  assertKnownOptions,
  assertLimits,
  smallestCapacity,
  tightestWhenFull,
} = internal;

/**
 * The per-request tier: every decision is one atomic store op (on Redis, a key-op inside a
 * coalesced EVALSHA), so the shared limit is exact, at the cost of a round trip per request
 * (with `rememberDenials`, a key the store turned away costs none until a token could pass). A
 * store that fails, times out (`timeoutMs`, default 20 ms) or is behind an open breaker never
 * throws into the request: the limit's declared `failurePolicy` decides, and the `failure`,
 * `degraded` and `recovered` events report it.
 *
 * @example
 * const limiter = new RequestLimiter({ store: new MemoryStore(), limits: perSecond(10), failurePolicy: 'open' });
 * const decision = await limiter.consume('user:42');
 * if (!decision.allowed) console.log(`retry in ${decision.retryAfterMs} ms`);
 */
export class RequestLimiter extends EventEmitter<LimiterEvents> implements Limiter {
  #limits: readonly LimitSpec[];
  #maxCost: number;
  readonly #store: GuardedStore;
  readonly #blocked: BlockList;
  readonly #denials: DenialMemory | undefined;
  readonly #clock: Clock;
  /** Store calls made and not settled yet: `close()` waits for them. */
  readonly #calls = new InFlight();
  #closed = false;
  #storeOps = 0;

  constructor(options: RequestLimiterOptions) {
    super();
    if (options === null || typeof options !== 'object')
      throw new ConfigError('options', options, 'an object');
    assertKnownOptions('', options, [...STORE_LIMITER_OPTION_NAMES, 'maxKeys', 'rememberDenials']);
    this.#clock = options.clock === undefined ? performance : assertClock('clock', options.clock);
    this.#limits = assertLimits('limits', options.limits);
    this.#maxCost = smallestCapacity(this.#limits);
    this.#store = new GuardedStore(options, this.#limits, this.#clock, this);
    const maxKeys = resolveMaxKeys(options.maxKeys);
    this.#blocked = new BlockList(maxKeys, this.#clock);
    this.#denials = assertBoolean('rememberDenials', options.rememberDenials ?? false)
      ? new DenialMemory(maxKeys, this.#clock)
      : undefined;
  }

  /** The limits, all-or-nothing, as in force now. */
  get limits(): readonly LimitSpec[] {
    return this.#limits;
  }

  /** The declared failure policy. */
  get failurePolicy() {
    return this.#store.policy.policy;
  }

  /**
   * The limits the `local` failure policy decides by while the store fails (the limits divided by
   * `fallback.instances`, or `fallback.limits`); `undefined` under `open` and `closed`. The HTTP
   * middleware announces them in the headers of a fallback decision.
   */
  get fallbackLimits(): readonly LimitSpec[] | undefined {
    return this.#store.policy.localLimits;
  }

  /** Whether the store is considered down (the breaker is open or probing). */
  get degraded(): boolean {
    return this.#store.guard.degraded;
  }

  /**
   * Takes `cost` tokens for `key` with one store op. Resolves a `Decision`, never rejects for a
   * store failure; throws at once for a key that is not a string, a cost that is not a whole
   * number from 1 to the smallest capacity, or a closed limiter.
   */
  consume(key: string, cost = 1): Promise<Decision> {
    this.#check(key);
    assertCost(cost, this.#maxCost);
    const blockedMs = this.#blocked.blockedFor(key);
    if (blockedMs > 0) return Promise.resolve(this.#store.count(this.#blockedFor(blockedMs)));
    // A remembered denial is the wait for one token: a larger cost's is longer, and maybe another
    // limit's (it said 2 s where the store says 4 s for a cost of 2 at 0.5/s), so the store answers it.
    const denied = cost === 1 ? this.#denials?.recall(key) : undefined;
    if (denied !== undefined) return Promise.resolve(this.#store.count(denied));
    return this.#ask(key, cost, { key, limits: this.#limits, take: cost });
  }

  /**
   * What a request of cost 1 would get now, taking nothing (one store op, no tokens; none if
   * blocked); in shadow mode admitted, with `shadowDenied`, as a request would be.
   */
  peek(key: string): Promise<Decision> {
    this.#check(key);
    const blockedMs = this.#blocked.blockedFor(key);
    const store = this.#store;
    if (blockedMs > 0) return Promise.resolve(store.looked(this.#blockedFor(blockedMs)));
    return this.#look(key, this.#limits);
  }

  /**
   * Forgets `key` in the store (and lifts a block); resolves whether the store did it in time (a
   * reset still queued or on its way when it timed out may run later).
   */
  reset(key: string): Promise<boolean> {
    this.#check(key);
    this.#blocked.unblock(key);
    this.#denials?.forget(key);
    const limits = this.#limits;
    // Counted as it is sent, as every other call is: `storeOps` missed each reset.
    const reset = this.#store.guard.run(() => {
      this.#storeOps++;
      return this.#store.store.reset(key, limits);
    });
    return this.#calls.track(reset).then((r) => r.ok);
  }

  /**
   * Gives `tokens` back to `key`, never past its capacity; resolves `true` once the store did it,
   * `false` when the store failed or did not answer in time: an op still queued then was never
   * sent, one already on its way may have run.
   */
  reward(key: string, tokens: number): Promise<boolean> {
    this.#check(key);
    return this.#adjust(key, { key, limits: this.#limits, credit: assertTokens(tokens) });
  }

  /**
   * Takes `tokens` from `key` regardless (at most a capacity into debt); resolves `true` once done,
   * `false` when the store failed or did not answer in time: an op still queued then was never
   * sent, one already on its way may have run.
   */
  penalty(key: string, tokens: number): Promise<boolean> {
    this.#check(key);
    return this.#adjust(key, { key, limits: this.#limits, debit: assertTokens(tokens) });
  }

  /** Denies `key` for `ms` in this process, with no store call (tier `local`). */
  block(key: string, ms: number): void {
    this.#check(key);
    this.#blocked.block(key, assertBlockMs(ms));
  }

  /**
   * Replaces the limits. A limit that keeps its name keeps each key's buckets, global and fallback
   * (cut to a lower capacity); a new name (an unnamed limit is named by its numbers) starts full.
   */
  setLimits(limits: LimitSpec | readonly LimitSpec[]): void {
    if (this.#closed) throw new ClosedError('RequestLimiter');
    const next = assertLimits('limits', limits);
    this.#store.setLimits(next);
    this.#denials?.clear();
    this.#limits = next;
    this.#maxCost = smallestCapacity(next);
  }

  /** Counters since the limiter was made. */
  stats(): RequestLimiterStats {
    const counts = this.#store.counts;
    return {
      decisions: { global: counts.global, fallback: counts.fallback, local: counts.local },
      allowed: counts.allowed,
      denied: counts.denied,
      storeOps: this.#storeOps,
      storeFailures: this.#store.guard.failures,
      fallbackMs: this.#store.guard.degradedMs,
    };
  }

  /**
   * Stops the limiter; later calls throw `ClosedError`. Resolves once the store calls made before
   * it have settled (each within `timeoutMs`), so that the store's client can be closed next; the
   * store is the caller's to close. A request made before still gets its decision, and a failure
   * of its store call is still reported on `failure`: the listeners stay.
   */
  close(): Promise<void> {
    this.#closed = true;
    // Its time spent degraded stops once the calls made before it have settled.
    return this.#calls.close().then(() => this.#store.guard.end());
  }

  /** A blocked key's decision; resetMs is whole ms, rounded up, as every decision's. */
  #blockedFor(blockedMs: number): Decision {
    return denyDecision(blockedMs, 0, Math.ceil(blockedMs), tightestWhenFull(this.#limits), 'local');
  }

  #check(key: string): void {
    if (this.#closed) throw new ClosedError('RequestLimiter');
    assertKey(key);
  }

  async #ask(key: string, cost: number, op: BucketOp): Promise<Decision> {
    const denials = this.#denials;
    const ask = denials === undefined ? 0 : denials.ask();
    const askedAt = denials === undefined ? 0 : this.#clock.now();
    this.#calls.enter();
    try {
      const result = await this.#store.send(() => this.#sent(op));
      if (!result.ok) return this.#store.byPolicy(key, cost, result.error);
      denials?.remember(key, cost, result.value, op.limits, ask, askedAt);
      return this.#store.count(decisionOf(result.value, op.limits, 'global'));
    } finally {
      this.#calls.leave();
    }
  }

  async #look(key: string, limits: readonly LimitSpec[]): Promise<Decision> {
    const store = this.#store;
    this.#calls.enter();
    try {
      const result = await store.send(() => this.#sent({ key, limits }));
      return store.looked(
        result.ok ? decisionOf(result.value, limits, 'global') : await store.policy.peek(key, result.error),
      );
    } finally {
      this.#calls.leave();
    }
  }

  /** A reward or penalty of `key`, with its remembered denial forgotten meanwhile (`DenialMemory.around`). */
  #adjust(key: string, op: BucketOp): Promise<boolean> {
    if (this.#denials === undefined) return this.#manage(op);
    return this.#denials.around(key, (landedLate) => this.#manage(op, landedLate));
  }

  /** Sends `op`; `landedLate` is called if it lands after the guard gave up on it (it was on its way). */
  #manage(op: BucketOp, landedLate?: () => void): Promise<boolean> {
    return this.#calls.track(this.#store.send(() => this.#sent(op), landedLate)).then((result) => result.ok);
  }

  #sent(op: BucketOp): BucketOp {
    this.#storeOps++;
    return op;
  }
}
