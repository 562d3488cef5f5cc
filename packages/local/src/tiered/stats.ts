import type { LimiterEvents, LimiterStats } from '@tiered-limiter/core';
import type { TieredParts } from './wiring.js';

/** Counters of a `TieredLimiter` since it was made. */
export interface TieredLimiterStats extends LimiterStats {
  /** Decisions by the tier that made them. */
  readonly decisions: {
    /** From leased tokens or a remembered denial, with no wait. */
    readonly lease: number;
    /** After waiting for a store call. */
    readonly global: number;
    /** By the failure policy. */
    readonly fallback: number;
    /**
     * In process with no lease to answer from: a blocked key's denial, or a new key admitted by
     * optimistic cold start before the store heard of it.
     */
    readonly local: number;
  };
  /**
   * Store operations sent: refills plus settles. A store that coalesces (`RedisStore`) carries many
   * in one call; its own `stats().calls` counts the round trips.
   */
  readonly storeOps: number;
  /** Refill (`reserve`) ops sent. */
  readonly refills: number;
  /**
   * Settle ops sent: every op that asks for nothing (hand-backs of expired or evicted leases and at
   * `close()`, `reward` and `penalty`, optimistic cold start's charges).
   */
  readonly refunds: number;
  /** Tokens granted by the global bucket as leases. */
  readonly tokensLeased: number;
  /**
   * Tokens taken by takes: a sparse key's request, decided by the store with no lease kept. A take
   * that lands after the failure policy decided its request is counted too, and stays taken under
   * every policy (README, "When Redis fails").
   */
  readonly tokensTaken: number;
  /** Unspent tokens handed back in reports whose call succeeded. */
  readonly tokensRefunded: number;
  /**
   * Tokens whose grant expired here before they were spent, or that a periodic sync ended early
   * with the grant it replaced (handed back when the store answers).
   */
  readonly tokensExpired: number;
  /**
   * Reported tokens whose call failed: hand-backs and spends the store may never have heard of.
   * They are never resent (the call may have run); the store releases them with their generation.
   */
  readonly tokensUnreported: number;
  /** Tokens held in leases now, not yet spent nor returned. */
  readonly tokensHeld: number;
  /** Round-trip time of refills that answered, in ms. */
  readonly refillLatencyMs: {
    /** Refills that answered. */
    readonly count: number;
    /** Their mean round trip, in ms. */
    readonly mean: number;
    /** The longest, in ms. */
    readonly max: number;
  };
  /** Milliseconds spent degraded (store considered down), the current spell included, until `close()` ends. */
  readonly fallbackMs: number;
  /** Whether the store is considered down now. */
  readonly degraded: boolean;
  /** Keys in the lease table. */
  readonly keys: number;
  /**
   * Keys seen once lately, with no lease: a key's first hit is a take of its own, and its next
   * within the sync's longest period (5 s) or the lease lifetime, if longer, makes its lease.
   */
  readonly keysSeenOnce: number;
  /** Tokens admitted by optimistic cold start before the store heard of their key. */
  readonly tokensOptimistic: number;
  /** The fleet size the limiter sizes leases by: the store's live count, at least the declared one. */
  readonly instances: number | undefined;
  /**
   * Instances alive as the store last counted them (the periodic sync's heartbeats), below the
   * declared `instances` too; `undefined` without the sync, with a store that keeps no registry,
   * or before its first answer.
   */
  readonly liveInstances: number | undefined;
  /** The periodic sync's period now, in ms (`undefined` without the sync). */
  readonly syncPeriodMs: number | undefined;
  /**
   * Whether the hot path reads the process's shared clock thread now: it does while it makes
   * 250,000 decisions a second or more, and reads `performance.now()` below 100,000 (`HotClock`).
   */
  readonly clockThread: boolean;
}

/** The counters a `TieredLimiter` keeps; the hot path bumps `lease` and `allowed` directly. */
export class TieredCounters {
  refills = 0;
  refunds = 0;
  tokensLeased = 0;
  tokensTaken = 0;
  tokensRefunded = 0;
  tokensExpired = 0;
  tokensUnreported = 0;
  tokensOptimistic = 0;
  #latencyCount = 0;
  #latencySum = 0;
  #latencyMax = 0;

  /** Records one refill's round trip. */
  latency(ms: number): void {
    this.#latencyCount++;
    this.#latencySum += ms;
    if (ms > this.#latencyMax) this.#latencyMax = ms;
  }

  /** The refill latency summary. */
  latencySummary(): TieredLimiterStats['refillLatencyMs'] {
    const count = this.#latencyCount;
    return { count, mean: count === 0 ? 0 : this.#latencySum / count, max: this.#latencyMax };
  }
}

/** A `TieredLimiterStats` snapshot of a limiter's parts. */
export function tieredStats(parts: TieredParts): TieredLimiterStats {
  const { store, counters: c, book, syncer, config, leases, sightings } = parts;
  const counts = store.counts;
  sightings.age(parts.clock.now());
  return {
    // Every tier the counts keep: without `local`, the tiers summed short of `allowed + denied`
    // by every blocked key's denial and every optimistic admission.
    decisions: { lease: counts.lease, global: counts.global, fallback: counts.fallback, local: counts.local },
    allowed: counts.allowed,
    denied: counts.denied,
    storeOps: c.refills + c.refunds,
    refills: c.refills,
    refunds: c.refunds,
    tokensLeased: c.tokensLeased,
    tokensTaken: c.tokensTaken,
    tokensRefunded: c.tokensRefunded,
    tokensExpired: c.tokensExpired,
    tokensUnreported: c.tokensUnreported,
    tokensOptimistic: c.tokensOptimistic,
    tokensHeld: book.held(),
    refillLatencyMs: c.latencySummary(),
    fallbackMs: store.guard.degradedMs,
    degraded: store.guard.degraded,
    keys: leases.size,
    keysSeenOnce: sightings.size,
    instances: syncer?.instances ?? config.instances,
    liveInstances: syncer?.fleet.live,
    syncPeriodMs: syncer?.periodMs,
    clockThread: parts.hotClock.view !== undefined,
  };
}

/** Events of a `TieredLimiter`: the store's, and the fleet's size when it outgrows the declared one. */
export interface TieredLimiterEvents extends LimiterEvents {
  /**
   * The store reports more live instances than `instances` declared: fair shares and the optimistic
   * cold start's bound assumed fewer. The limiter sizes its leases and its `local` failure policy's
   * limits by the live count already, and optimistic cold start gives no credit until the count is
   * back within the declared one.
   */
  fleet: [
    info: {
      /** Instances alive now, as the store counts them. */
      instances: number;
      /** The `instances` option. */
      declared: number | undefined;
    },
  ];
}
