import { EventEmitter } from 'node:events';
import {
  allowDecision,
  assertCost,
  assertInRange,
  assertInteger,
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
  type ReserveReply,
  shadowOf,
  smallestCapacity,
  tightestWhenFull,
} from '@tiered-limiter/core';
import { LRUCache } from 'lru-cache';
import pLimit, { type LimitFunction } from 'p-limit';
import { type AcquireOptions, type AcquireResult, acquireInLine, KeyedQueue } from './acquire.js';
import { type BatchPolicy, batchSize } from './batch-size.js';
import { DEFAULT_MAX_KEYS, MAX_MAX_KEYS } from './defaults.js';
import { FailurePolicyDecider, type FailurePolicyOptions } from './failure-policy.js';
import { addGrant, drain, dropExpired, Lease, promoteIfOlderSpent } from './lease.js';
import { type GuardEvents, StoreGuard, type StoreGuardOptions } from './store-guard.js';
import {
  DEFAULT_ASSUMED_INSTANCES,
  DEFAULT_CLOSE_TIMEOUT_MS,
  DEFAULT_COARSE_TICK_MS,
  DEFAULT_HORIZON_MS,
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_LOW_WATER,
  DEFAULT_MAX_BATCH,
  DEFAULT_MAX_CONCURRENT_REFILLS,
  DEFAULT_MIN_BATCH,
} from './tiered-defaults.js';

/** Lease options of `TieredLimiter`. */
export interface LeaseOptions {
  /**
   * Milliseconds a leased token stays good. Unused tokens go back to the global bucket when
   * it ends. The fleet's accuracy bound is `capacity + rate × (window + ttlMs)`: shorter is
   * tighter, longer costs fewer round trips for bursty keys.
   * @default 1000
   */
  ttlMs?: number;
  /** A batch aims to last this many ms at the key's observed rate. @default 100 */
  horizonMs?: number;
  /** Smallest batch a refill asks for. @default 1 */
  minBatch?: number;
  /** Largest batch a refill asks for. @default 100_000 */
  maxBatch?: number;
  /**
   * Fraction of a grant at which a lease admission starts the next refill in the background,
   * so that the lease is refilled before it runs dry.
   * @default 0.25
   */
  lowWater?: number;
}

/** Options of `TieredLimiter`. */
export interface TieredLimiterOptions extends StoreGuardOptions, FailurePolicyOptions {
  /** The shared store every instance leases from, e.g. a `RedisStore`. */
  store: GlobalStore;
  /** The limit, or several limits checked all-or-nothing; a lease is the smallest grant across them. */
  limits: LimitSpec | readonly LimitSpec[];
  /**
   * Instances expected to share the limit. Caps one lease at `capacity / instances` (fair
   * share), sizes batches near the limit, and, for `failurePolicy: 'local'`, divides the limit
   * for the fallback bucket unless `fallback` says otherwise.
   * @default 4 for batch sizing; the local fallback requires it (or `fallback.limits`)
   */
  instances?: number;
  /** Lease sizing and lifetime. */
  lease?: LeaseOptions;
  /** Keys tracked at most; the least recently used is evicted and its lease returned. @default 100_000 */
  maxKeys?: number;
  /** Refills and refunds in flight at once across all keys. @default 1024 */
  maxConcurrentRefills?: number;
  /**
   * How often, in ms, the hot path's coarse clock is read. Lease expiry is brought forward by
   * this much so the bound still holds. 0 reads the clock on every decision.
   * @default 5
   */
  coarseTickMs?: number;
  /** Shadow mode: decide and report, but admit everything. @default false */
  shadow?: boolean;
}

/** Counters of a `TieredLimiter` since it was made. */
export interface TieredLimiterStats {
  /** Decisions by the tier that made them. */
  readonly decisions: { readonly lease: number; readonly global: number; readonly fallback: number };
  /** Decisions that admitted. */
  readonly allowed: number;
  /** Decisions that denied (shadow-mode denials included: they are what the limit decided). */
  readonly denied: number;
  /** Store calls sent: refills plus refunds. */
  readonly roundTrips: number;
  /** Refill (`reserve`) calls sent. */
  readonly refills: number;
  /** Refund calls sent. */
  readonly refunds: number;
  /** Tokens granted by the global bucket. */
  readonly tokensLeased: number;
  /** Tokens given back to the global bucket. */
  readonly tokensRefunded: number;
  /** Tokens whose lease expired before they were spent. */
  readonly tokensExpired: number;
  /** Tokens held in leases now, not yet spent nor returned. */
  readonly tokensHeld: number;
  /** Round-trip time of refills that answered, in ms. */
  readonly refillLatencyMs: { readonly count: number; readonly mean: number; readonly max: number };
  /** Milliseconds spent degraded (store considered down), the current spell included. */
  readonly fallbackMs: number;
  /** Whether the store is considered down now. */
  readonly degraded: boolean;
  /** Keys in the lease table. */
  readonly keys: number;
}

const MAX_ATTEMPTS = 4;

/**
 * The two-tier limiter: most decisions come from tokens this instance leased in batches from
 * the shared store, with no round trip, no promise and no clock read (`tryConsume`); a lease
 * is refilled in the background before it runs dry, returned when it expires, and denials
 * from the global bucket are remembered until it can have tokens again. While the store is
 * away the limit's `failurePolicy` decides, leftover leased tokens first, and a breaker keeps
 * requests from paying the timeout; it recovers by itself.
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
export class TieredLimiter extends EventEmitter<GuardEvents> {
  /** The limits, all-or-nothing. */
  readonly limits: readonly LimitSpec[];
  readonly #store: GlobalStore;
  readonly #guard: StoreGuard;
  readonly #policy: FailurePolicyDecider;
  readonly #clock: Clock;
  readonly #leases: LRUCache<string, Lease>;
  readonly #holding = new Set<Lease>();
  readonly #queue: LimitFunction;
  readonly #batch: BatchPolicy;
  readonly #ttlMs: number;
  readonly #lowWater: number;
  readonly #tickMs: number;
  readonly #maxCost: number;
  readonly #capacity: number;
  readonly #slowestRefillPerMs: number;
  readonly #shadow: boolean;
  readonly #waiters = new KeyedQueue();
  readonly #timer: NodeJS.Timeout;
  readonly #sweepEveryMs: number;
  readonly #pendingRefunds = new Set<Promise<unknown>>();
  #coarseNow: number;
  #lastSweepMs: number;
  #lastKey: string | undefined;
  #lastLease: Lease | undefined;
  #closed = false;
  // counters
  #lease = 0;
  #global = 0;
  #fallback = 0;
  #allowed = 0;
  #denied = 0;
  #refills = 0;
  #refunds = 0;
  #tokensLeased = 0;
  #tokensRefunded = 0;
  #tokensExpired = 0;
  #latencyCount = 0;
  #latencySum = 0;
  #latencyMax = 0;

  constructor(options: TieredLimiterOptions) {
    super();
    if (options === null || typeof options !== 'object')
      throw new ConfigError('options', options, 'an object');
    this.#store = assertStore(options.store);
    this.#clock = options.clock ?? performance;
    this.limits = assertLimits('limits', options.limits);
    this.#maxCost = smallestCapacity(this.limits);
    this.#capacity = this.#maxCost;
    this.#slowestRefillPerMs = Math.min(...this.limits.map((l) => l.refillPerMs));
    const instances =
      options.instances === undefined
        ? undefined
        : assertInteger('instances', options.instances, 1, 1_000_000);
    const fallback =
      options.failurePolicy === 'local' && instances !== undefined && options.fallback?.limits === undefined
        ? { ...options.fallback, instances: options.fallback?.instances ?? instances }
        : options.fallback;
    this.#policy = new FailurePolicyDecider({ ...options, fallback }, this.limits, this.#clock);
    this.#shadow = options.shadow ?? false;

    const lease = options.lease ?? {};
    if (lease === null || typeof lease !== 'object') throw new ConfigError('lease', lease, 'an object');
    this.#ttlMs = assertInteger('lease.ttlMs', lease.ttlMs ?? DEFAULT_LEASE_TTL_MS, 1, 3_600_000);
    this.#tickMs = assertInteger('coarseTickMs', options.coarseTickMs ?? DEFAULT_COARSE_TICK_MS, 0, 1000);
    if (this.#tickMs >= this.#ttlMs) {
      throw new ConfigError('coarseTickMs', this.#tickMs, `below lease.ttlMs (${this.#ttlMs})`);
    }
    const minBatch = assertInteger('lease.minBatch', lease.minBatch ?? DEFAULT_MIN_BATCH, 1);
    const maxBatch = assertInteger('lease.maxBatch', lease.maxBatch ?? DEFAULT_MAX_BATCH, minBatch);
    const competitors = instances ?? DEFAULT_ASSUMED_INSTANCES;
    this.#batch = {
      minBatch,
      maxBatch,
      horizonMs: assertInteger('lease.horizonMs', lease.horizonMs ?? DEFAULT_HORIZON_MS, 1, 3_600_000),
      fairShare: Math.max(1, Math.floor(this.#capacity / competitors)),
      competitors,
    };
    this.#lowWater = assertInRange('lease.lowWater', lease.lowWater ?? DEFAULT_LOW_WATER, 0, 1);

    this.#guard = new StoreGuard({ ...options, clock: this.#clock });
    this.#guard.relayTo(this);
    this.#queue = pLimit(
      assertInteger(
        'maxConcurrentRefills',
        options.maxConcurrentRefills ?? DEFAULT_MAX_CONCURRENT_REFILLS,
        1,
        100_000,
      ),
    );
    this.#leases = new LRUCache<string, Lease>({
      max: assertInteger('maxKeys', options.maxKeys ?? DEFAULT_MAX_KEYS, 1, MAX_MAX_KEYS),
      dispose: (lease) => this.#detach(lease),
    });

    this.#coarseNow = this.#clock.now();
    this.#lastSweepMs = this.#coarseNow;
    this.#sweepEveryMs = Math.max(1, Math.floor(this.#ttlMs / 4));
    this.#timer = setInterval(() => this.#tick(), this.#tickMs > 0 ? this.#tickMs : this.#sweepEveryMs);
    // A limiter's timers never keep a process alive.
    this.#timer.unref();
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
   * The hot path: a decision from this instance's lease or remembered denial, synchronously,
   * or `undefined` when only the store can answer (then call `consume`). No promise, no
   * timer, no clock read; one allocation, the `Decision`. Throws for a bad key or cost, or
   * a closed limiter.
   */
  tryConsume(key: string, cost = 1): Decision | undefined {
    if (this.#closed) throw new ClosedError('TieredLimiter');
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
    const now = this.#tickMs === 0 ? this.#clock.now() : this.#coarseNow;
    if (lease.tokens >= cost && now < lease.expiresAtMs) {
      lease.tokens -= cost;
      lease.usedSinceRefill += cost;
      promoteIfOlderSpent(lease);
      if (lease.tokens <= lease.lowWater && lease.refill === undefined && now >= lease.deniedUntilMs) {
        this.#refillInBackground(lease);
      }
      this.#lease++;
      this.#allowed++;
      return allowDecision(lease.tokens + lease.globalRemaining, lease.resetMs, lease.limit, 'lease');
    }
    if (now < lease.deniedUntilMs) {
      this.#lease++;
      this.#denied++;
      const denied = denyDecision(
        lease.deniedUntilMs - now,
        lease.tokens,
        lease.resetMs,
        lease.limit,
        'lease',
      );
      return this.#shadow ? shadowOf(denied) : denied;
    }
    return undefined;
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
   * Waits in line (FIFO per key, in this process) until `cost` tokens are there, for work
   * that must stay under a quota rather than be dropped. Gives up at `maxWaitMs` (default
   * 10 s) or when `signal` aborts, and says which in the result; never rejects.
   */
  acquire(key: string, cost = 1, options: AcquireOptions = {}): Promise<AcquireResult> {
    if (this.#closed) throw new ClosedError('TieredLimiter');
    assertKey(key);
    assertCost(cost, this.#maxCost);
    return acquireInLine(this.#waiters, key, () => this.consume(key, cost), this.#clock, options);
  }

  /** Counters since the limiter was made. */
  stats(): TieredLimiterStats {
    return {
      decisions: { lease: this.#lease, global: this.#global, fallback: this.#fallback },
      allowed: this.#allowed,
      denied: this.#denied,
      roundTrips: this.#refills + this.#refunds,
      refills: this.#refills,
      refunds: this.#refunds,
      tokensLeased: this.#tokensLeased,
      tokensRefunded: this.#tokensRefunded,
      tokensExpired: this.#tokensExpired,
      tokensHeld: this.#tokensHeld(),
      refillLatencyMs: {
        count: this.#latencyCount,
        mean: this.#latencyCount === 0 ? 0 : this.#latencySum / this.#latencyCount,
        max: this.#latencyMax,
      },
      fallbackMs: this.#guard.degradedMs,
      degraded: this.#guard.degraded,
      keys: this.#leases.size,
    };
  }

  /**
   * Stops the timers, returns every unused leased token to the global bucket (waiting at most
   * about a second for the store), and makes later calls throw `ClosedError`.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    const inFlight: Promise<unknown>[] = [];
    for (const lease of this.#leases.values()) if (lease.refill) inFlight.push(lease.refill);
    this.#leases.clear(); // dispose → #detach returns each lease's tokens
    this.#lastKey = undefined;
    this.#lastLease = undefined;
    const deadline = new Promise<void>((resolve) => setTimeout(resolve, DEFAULT_CLOSE_TIMEOUT_MS).unref());
    await Promise.race([
      Promise.allSettled(inFlight).then(() => Promise.allSettled([...this.#pendingRefunds])),
      deadline,
    ]);
    this.removeAllListeners();
    this.#guard.removeAllListeners();
  }

  async #consumeSlow(key: string, cost: number): Promise<Decision> {
    let lease = this.#leaseFor(key);
    for (let attempt = 0; ; attempt++) {
      // Evicted while this request waited: its tokens went back; carry on with a fresh lease.
      if (lease.detached) lease = this.#leaseFor(key);
      const now = this.#refreshNow();
      this.#expire(lease, now);
      if (lease.tokens >= cost) {
        lease.tokens -= cost;
        lease.usedSinceRefill += cost;
        promoteIfOlderSpent(lease);
        return this.#count(
          allowDecision(
            lease.tokens + lease.globalRemaining,
            lease.resetMs,
            lease.limit,
            attempt === 0 ? 'lease' : 'global',
          ),
        );
      }
      if (now < lease.deniedUntilMs) {
        const tier = attempt === 0 ? 'lease' : 'global';
        return this.#count(
          denyDecision(lease.deniedUntilMs - now, lease.tokens, lease.resetMs, lease.limit, tier),
        );
      }
      const refused = this.#guard.refusal();
      if (refused) return this.#count(this.#policy.decide(key, cost, refused));
      if (attempt === MAX_ATTEMPTS) {
        // Other waiters keep winning the tokens this request's refills bring: say so, briefly.
        return this.#count(denyDecision(1, lease.tokens, lease.resetMs, lease.limit, 'global'));
      }
      const refill = lease.refill ?? this.#startRefill(lease, Math.max(1, cost - lease.tokens));
      lease.pendingCost += cost;
      const result = await this.#guard.run(() => refill);
      lease.pendingCost -= cost;
      if (!result.ok) return this.#count(this.#policy.decide(key, cost, result.error));
    }
  }

  #leaseFor(key: string): Lease {
    let lease = this.#leases.get(key);
    if (lease === undefined) {
      lease = new Lease(key, this.#clock.now(), tightestWhenFull(this.limits));
      this.#leases.set(key, lease);
    }
    return lease;
  }

  #count(decision: Decision): Decision {
    if (decision.tier === 'lease') this.#lease++;
    else if (decision.tier === 'global') this.#global++;
    else this.#fallback++;
    if (decision.allowed) this.#allowed++;
    else this.#denied++;
    return this.#shadow ? shadowOf(decision) : decision;
  }

  #refreshNow(): number {
    this.#coarseNow = this.#clock.now();
    return this.#coarseNow;
  }

  #refillInBackground(lease: Lease): void {
    if (!this.#guard.accepting) return;
    const refill = this.#startRefill(lease, 1);
    // Run through the guard too, so that background refills feed the breaker.
    void this.#guard.run(() => refill);
  }

  #startRefill(lease: Lease, min: number): Promise<ReserveReply> {
    const sentAt = this.#clock.now();
    const want = batchSize(
      {
        used: lease.usedSinceRefill,
        elapsedMs: sentAt - lease.lastRefillAtMs,
        pending: Math.max(lease.pendingCost - lease.tokens, min),
        globalRemaining: Math.min(
          this.#capacity,
          lease.globalRemaining + (sentAt - lease.replyAtMs) * this.#slowestRefillPerMs,
        ),
      },
      this.#batch,
    );
    lease.usedSinceRefill = 0;
    lease.lastRefillAtMs = sentAt;
    this.#refills++;
    const refill = this.#queue(() => this.#store.reserve(lease.key, this.limits, want, Math.min(min, want)));
    lease.refill = refill;
    refill.then(
      (reply) => {
        if (lease.refill === refill) lease.refill = undefined;
        this.#applyGrant(lease, reply, sentAt);
      },
      () => {
        if (lease.refill === refill) lease.refill = undefined;
      },
    );
    return refill;
  }

  #applyGrant(lease: Lease, reply: ReserveReply, sentAtMs: number): void {
    const now = this.#clock.now();
    const latency = now - sentAtMs;
    this.#latencyCount++;
    this.#latencySum += latency;
    if (latency > this.#latencyMax) this.#latencyMax = latency;
    this.#tokensLeased += reply.granted;
    if (lease.detached) {
      if (reply.granted > 0) this.#giveBack(lease.key, reply.granted);
      return;
    }
    lease.globalRemaining = reply.remaining;
    lease.replyAtMs = now;
    lease.resetMs = reply.resetMs;
    lease.limit = this.limits.find((l) => l.capacity === reply.limit) ?? lease.limit;
    if (reply.granted > 0) {
      // The token's life is counted from when it was asked for, before Redis granted it, and
      // shortened by one coarse tick because the hot path may read a clock that old.
      addGrant(lease, reply.granted, sentAtMs + this.#ttlMs - this.#tickMs);
      lease.lowWater = Math.ceil(reply.granted * this.#lowWater);
      lease.deniedUntilMs = 0;
      this.#holding.add(lease);
    } else {
      lease.deniedUntilMs = now + Math.max(1, reply.retryAfterMs);
    }
  }

  #expire(lease: Lease, now: number): void {
    const dropped = dropExpired(lease, now);
    if (dropped > 0) {
      this.#tokensExpired += dropped;
      this.#giveBack(lease.key, dropped);
    }
  }

  #detach(lease: Lease): void {
    lease.detached = true;
    this.#holding.delete(lease);
    if (this.#lastLease === lease) {
      this.#lastKey = undefined;
      this.#lastLease = undefined;
    }
    const held = drain(lease);
    if (held > 0) this.#giveBack(lease.key, held);
  }

  #giveBack(key: string, tokens: number): void {
    if (!this.#guard.accepting) return;
    this.#refunds++;
    const refund = this.#guard.run(() => this.#queue(() => this.#store.refund(key, this.limits, tokens)));
    this.#pendingRefunds.add(refund);
    void refund.then((result) => {
      this.#pendingRefunds.delete(refund);
      if (result.ok) this.#tokensRefunded += tokens;
    });
  }

  #tokensHeld(): number {
    let held = 0;
    for (const lease of this.#holding) held += lease.tokens;
    return held;
  }

  #tick(): void {
    const now = this.#refreshNow();
    if (now - this.#lastSweepMs < this.#sweepEveryMs) return;
    this.#lastSweepMs = now;
    for (const lease of this.#holding) {
      if (lease.tokens === 0) this.#holding.delete(lease);
      else this.#expire(lease, now);
    }
  }
}
