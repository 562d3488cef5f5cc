import { EventEmitter } from 'node:events';
import {
  allowDecision,
  assertClock,
  assertCost,
  assertKey,
  assertLimits,
  type Clock,
  ClosedError,
  ConfigError,
  type Decision,
  denyDecision,
  type LimiterEvents,
  type LimitSpec,
  type SyncLimiter,
  smallestCapacity,
  tightestWhenFull,
} from '@tiered-limiter/core';
import type { LRUCache } from 'lru-cache';
import {
  type AcquireOptions,
  type AcquireResult,
  acquireInLine,
  assertAcquireOptions,
  KeyedQueue,
} from '../acquire.js';
import { assertBlockMs } from '../block-list.js';
import { decisionOf, GuardedStore } from '../guard/guarded-store.js';
import { assertTokens } from '../management.js';
import { lruTable } from '../table.js';
import { type Lease, Lease as LeaseState, nextHead, spend } from './lease.js';
import { LeaseBook } from './lease-book.js';
import { resolveTieredOptions, type TieredConfig, type TieredLimiterOptions } from './options.js';
import { Refiller } from './refiller.js';
import { acquireSharedClock, touchSharedClock } from './shared-clock.js';
import { TieredCounters, type TieredLimiterStats } from './stats.js';

/** Refills one request waits through before it stops losing the race to other waiters. */
const MAX_ATTEMPTS = 4;

/** The last-key cache when empty: equal to no key, so `tryConsume(undefined)` is checked too. */
const NO_KEY = Symbol('no key');

/**
 * The two-tier limiter: most decisions come from tokens this instance leased in batches from
 * the shared store, with no round trip and no promise (`tryConsume`); a lease is refilled in the
 * background before it runs dry, handed back when it expires, and denials from the global bucket
 * are remembered until it can have tokens again. The store holds leased tokens against the
 * bucket's room until they are spent or handed back, so the fleet admits no more than the one
 * bucket would. While the store is away the limit's `failurePolicy` decides, leftover leased
 * tokens first, and a breaker keeps requests from paying the timeout; it recovers by itself.
 *
 * @example
 * const limiter = new TieredLimiter({
 *   store: new MemoryStore(),
 *   limits: perSecond(100),
 *   failurePolicy: 'local',
 *   instances: 4,
 * });
 * const decision = limiter.tryConsume('user:42') ?? (await limiter.consume('user:42'));
 */
export class TieredLimiter extends EventEmitter<LimiterEvents> implements SyncLimiter {
  #limits: readonly LimitSpec[];
  #maxCost: number;
  readonly #config: TieredConfig;
  readonly #clock: Clock;
  /** The shared clock's slot, or `undefined` to read `#clock` on every decision. */
  readonly #view: Float64Array | undefined;
  readonly #store: GuardedStore;
  readonly #counters = new TieredCounters();
  readonly #refiller: Refiller;
  readonly #book: LeaseBook;
  readonly #leases: LRUCache<string, Lease>;
  readonly #waiters = new KeyedQueue();
  readonly #closing = new AbortController();
  #lastKey: string | symbol = NO_KEY;
  #denials = 0;
  #lastLease: Lease | undefined;
  #closed: Promise<void> | undefined;

  constructor(options: TieredLimiterOptions) {
    super();
    if (options === null || typeof options !== 'object')
      throw new ConfigError('options', options, 'an object');
    this.#clock = options.clock === undefined ? performance : assertClock('clock', options.clock);
    this.#limits = assertLimits('limits', options.limits);
    this.#maxCost = smallestCapacity(this.#limits);
    this.#config = resolveTieredOptions(options, this.#limits);
    this.#store = new GuardedStore(this.#config.storeOptions, this.#limits, this.#clock, this);
    this.#refiller = new Refiller(this.#store, this.#config, this.#clock, this.#counters, () => this.#limits);
    this.#leases = lruTable<string, Lease>(this.#config.maxKeys, (lease) => this.#evicted(lease));
    const shared = options.clock === undefined && !this.#config.exactClock ? acquireSharedClock() : undefined;
    this.#view = shared?.view;
    this.#book = new LeaseBook(
      this,
      this.#refiller,
      this.#counters,
      this.#clock,
      this.#config,
      shared !== undefined,
    );
  }

  /** The limits, all-or-nothing, as in force now. */
  get limits(): readonly LimitSpec[] {
    return this.#limits;
  }

  /** The declared failure policy. */
  get failurePolicy() {
    return this.#store.policy.policy;
  }

  /** Whether the store is considered down (the breaker is open or probing). */
  get degraded(): boolean {
    return this.#store.guard.degraded;
  }

  /**
   * The hot path: a decision from this instance's lease or remembered denial, synchronously, or
   * `undefined` when only the store can answer (then call `consume`). No promise, no timer; the
   * clock is the shared clock thread's slot, a memory read. One allocation, the `Decision`.
   * Throws for a bad key or cost, or a closed limiter.
   */
  tryConsume(key: string, cost = 1): Decision | undefined {
    if (this.#closed !== undefined) throw new ClosedError('TieredLimiter');
    if (cost !== 1) assertCost(cost, this.#maxCost);
    let lease: Lease | undefined;
    if (key === this.#lastKey) {
      lease = this.#lastLease!;
    } else {
      assertKey(key);
      lease = this.#leases.get(key);
      if (lease === undefined) return undefined;
      this.#lastKey = key;
      this.#lastLease = lease;
    }
    const view = this.#view;
    const now = view === undefined ? this.#clock.now() : view[0]!;
    const grant = lease.head;
    if (grant !== undefined && grant.left >= cost && now < grant.expiresAtMs) {
      grant.left -= cost;
      grant.spent += cost;
      lease.tokens -= cost;
      lease.usedSinceRefill += cost;
      if (grant.left === 0) nextHead(lease);
      if (lease.tokens <= lease.lowWater && lease.refill === undefined && now >= lease.deniedUntilMs) {
        void this.#refiller.refill(lease, 1);
      }
      const counts = this.#store.counts;
      counts.lease++;
      counts.allowed++;
      return allowDecision(lease.tokens + lease.globalRemaining, lease.resetMs, lease.limit, 'lease');
    }
    if (now < lease.deniedUntilMs) {
      // A clock thread starved of CPU reads early, which only keeps a denial a little past its
      // end; every 256th remembered denial checks the real clock so that it cannot keep it long.
      if (view !== undefined && (++this.#denials & 255) === 0) return this.#denyOnRealClock(lease);
      return this.#store.count(
        denyDecision(lease.deniedUntilMs - now, lease.tokens, lease.resetMs, lease.limit, 'lease'),
      );
    }
    return undefined;
  }

  #denyOnRealClock(lease: Lease): Decision | undefined {
    touchSharedClock();
    const now = this.#clock.now();
    if (now >= lease.deniedUntilMs) return undefined;
    return this.#store.count(
      denyDecision(lease.deniedUntilMs - now, lease.tokens, lease.resetMs, lease.limit, 'lease'),
    );
  }

  /**
   * Takes `cost` tokens for `key`: from the lease when it can (no round trip), else after the
   * refill in flight or a new one, else by the failure policy. Resolves a `Decision`, never
   * rejects for a store failure.
   */
  consume(key: string, cost = 1): Promise<Decision> {
    const fast = this.tryConsume(key, cost);
    return fast === undefined ? this.#consumeSlow(key, cost) : Promise.resolve(fast);
  }

  /**
   * Waits in line (FIFO per key, in this process) until `cost` tokens are there, for work that
   * must stay under a quota rather than be dropped. Gives up at `maxWaitMs` (default 10 s), when
   * `signal` aborts, or when the limiter closes, and says which in the result; never rejects.
   */
  acquire(key: string, cost = 1, options: AcquireOptions = {}): Promise<AcquireResult> {
    this.#check(key);
    assertCost(cost, this.#maxCost);
    const checked = assertAcquireOptions(options);
    return acquireInLine(
      this.#waiters,
      key,
      () => this.consume(key, cost),
      this.#clock,
      checked,
      this.#closing.signal,
    );
  }

  /** What a request of cost 1 would get now, taking nothing: the global bucket plus this lease. */
  peek(key: string): Promise<Decision> {
    this.#check(key);
    const blocked = this.#leases.peek(key);
    const now = this.#clock.now();
    if (blocked !== undefined && now < blocked.blockedUntilMs) {
      const ms = blocked.blockedUntilMs - now;
      return Promise.resolve(denyDecision(ms, 0, blocked.resetMs, blocked.limit, 'lease'));
    }
    const limits = this.#limits;
    return this.#store
      .send(() => ({ key, limits }))
      .then((result) => {
        if (!result.ok) return this.#store.policy.decide(key, 1, result.error);
        const lease = this.#leases.peek(key);
        const held = lease === undefined ? 0 : this.#book.live(lease);
        const spec = limits[result.value.limitIndex] ?? limits[0]!;
        return held > 0
          ? allowDecision(result.value.remaining + held, result.value.resetMs, spec, 'global')
          : decisionOf(result.value, limits, 'global');
      });
  }

  /** Forgets `key` everywhere: its lease here (nothing handed back) and its global buckets. */
  reset(key: string): Promise<boolean> {
    this.#check(key);
    const lease = this.#leases.peek(key);
    if (lease !== undefined) this.#book.forget(lease);
    this.#leases.delete(key);
    const limits = this.#limits;
    return this.#store.guard.run(() => this.#store.store.reset(key, limits)).then((r) => r.ok);
  }

  /** Gives `tokens` back to `key`'s global buckets, never past their room; resolves whether done. */
  reward(key: string, tokens: number): Promise<boolean> {
    this.#check(key);
    const op = { key, limits: this.#limits, credit: assertTokens(tokens) };
    return this.#store.send(() => op).then((r) => r.ok);
  }

  /** Takes `tokens` from `key`'s global buckets regardless (at most a capacity into debt). */
  penalty(key: string, tokens: number): Promise<boolean> {
    this.#check(key);
    const op = { key, limits: this.#limits, debit: assertTokens(tokens) };
    return this.#store.send(() => op).then((r) => r.ok);
  }

  /** Denies `key` for `ms` here with no round trip; its leased tokens go back to the store. */
  block(key: string, ms: number): void {
    this.#check(key);
    this.#book.block(this.#leaseFor(key), this.#clock.now() + assertBlockMs(ms));
  }

  /** Replaces the limits; keys keep their state, leases follow at their next refill. */
  setLimits(limits: LimitSpec | readonly LimitSpec[]): void {
    const next = assertLimits('limits', limits);
    this.#store.setLimits(next);
    this.#limits = next;
    this.#maxCost = smallestCapacity(next);
    this.#refiller.resize(next);
    // Tokens leased under the old limits go back, so that a lower capacity holds from now on.
    for (const lease of this.#leases.values()) this.#book.drain(lease);
  }

  /** Counters since the limiter was made. */
  stats(): TieredLimiterStats {
    const counts = this.#store.counts;
    const c = this.#counters;
    return {
      decisions: { lease: counts.lease, global: counts.global, fallback: counts.fallback },
      allowed: counts.allowed,
      denied: counts.denied,
      roundTrips: c.refills + c.refunds,
      refills: c.refills,
      refunds: c.refunds,
      tokensLeased: c.tokensLeased,
      tokensRefunded: c.tokensRefunded,
      tokensExpired: c.tokensExpired,
      tokensUnreported: c.tokensUnreported,
      tokensHeld: this.#book.held(),
      refillLatencyMs: c.latencySummary(),
      fallbackMs: this.#store.guard.degradedMs,
      degraded: this.#store.guard.degraded,
      keys: this.#leases.size,
    };
  }

  /**
   * Stops the timers, hands every unspent leased token back to the store (one attempt per key,
   * past an open breaker, waiting at most `closeTimeoutMs`), ends waiting `acquire`s with
   * `closed`, and makes later calls throw `ClosedError`. Always resolves within its wait.
   */
  close(): Promise<void> {
    if (this.#closed === undefined) {
      this.#closing.abort();
      this.#lastKey = NO_KEY;
      this.#lastLease = undefined;
      const leases = [...this.#leases.values()];
      this.#closed = this.#book
        .close(leases, () => this.#leases.clear())
        .then(() => {
          this.removeAllListeners();
          this.#store.close();
        });
    }
    return this.#closed;
  }

  #check(key: string): void {
    if (this.#closed !== undefined) throw new ClosedError('TieredLimiter');
    assertKey(key);
  }

  async #consumeSlow(key: string, cost: number): Promise<Decision> {
    let lease = this.#leaseFor(key);
    for (let attempt = 0; ; attempt++) {
      // Evicted while this request waited: its tokens went back; carry on with a fresh lease.
      if (lease.detached) lease = this.#leaseFor(key);
      const now = this.#clock.now();
      this.#book.expire(lease, now);
      const tier = attempt === 0 ? 'lease' : 'global';
      if (spend(lease, cost)) {
        return this.#store.count(
          allowDecision(lease.tokens + lease.globalRemaining, lease.resetMs, lease.limit, tier),
        );
      }
      if (now < lease.deniedUntilMs) {
        return this.#store.count(
          denyDecision(lease.deniedUntilMs - now, lease.tokens, lease.resetMs, lease.limit, tier),
        );
      }
      if (attempt === MAX_ATTEMPTS) {
        // Other waiters keep winning the tokens this request's refills bring: say so, briefly.
        return this.#store.count(denyDecision(1, lease.tokens, lease.resetMs, lease.limit, 'global'));
      }
      lease.pendingCost += cost;
      const result = await this.#refiller.refill(lease, Math.max(1, cost - lease.tokens));
      lease.pendingCost -= cost;
      if (!result.ok) return this.#store.byPolicy(key, cost, result.error);
      // The grant's own outcome: a denial is the reply's, not a second look at the lease.
      if (result.value.granted === 0)
        return this.#store.count(decisionOf(result.value, this.#limits, 'global'));
    }
  }

  #evicted(lease: Lease): void {
    if (this.#lastLease === lease) {
      this.#lastKey = NO_KEY;
      this.#lastLease = undefined;
    }
    this.#book.evicted(lease);
  }

  #leaseFor(key: string): Lease {
    let lease = this.#leases.get(key);
    if (lease === undefined) {
      lease = new LeaseState(key, this.#clock.now(), tightestWhenFull(this.#limits));
      this.#leases.set(key, lease);
    }
    return lease;
  }
}
