import type { Clock, LimitSpec } from '@tiered-limiter/core';
import type { BookHooks, BookParts } from './book-hooks.js';
import { BookRounds } from './book-rounds.js';
import type { HotClock } from './hot-clock.js';
import { drainLease, expireGrants, type Lease } from './lease.js';
import { carveOff, owes } from './lease-reports.js';
import type { TieredConfig } from './options.js';
import type { Refiller } from './refiller.js';
import { Settlements } from './settlements.js';
import type { TieredCounters } from './stats.js';
import type { Syncer } from './sync.js';

/**
 * The lease lifecycle of a two-tier limiter, beside its hot path: leases that hold tokens, what a
 * store's reply does to them, eviction, `block`, `reset` and `close()`. Its timer and the rounds
 * that sync or sweep the held leases are `rounds` (`BookRounds`).
 */
export class LeaseBook {
  readonly #holding = new Set<Lease>();
  /** What leases on their way out owe the store, and `close()`'s hand-back. */
  readonly #settlements: Settlements;
  readonly #refiller: Refiller;
  readonly #counters: TieredCounters;
  readonly #clock: Clock;
  readonly #config: TieredConfig;
  readonly #hotClock: HotClock;
  readonly #syncer: Syncer | undefined;
  readonly #hooks: BookHooks;
  /** The book's timer and its rounds: the hot path's `catchUp`, the first heartbeat. */
  readonly rounds: BookRounds;

  constructor(owner: object, parts: BookParts) {
    const { refiller, config } = parts;
    this.#refiller = refiller;
    this.#counters = parts.counters;
    this.#clock = parts.clock;
    this.#config = config;
    this.#hotClock = parts.hotClock;
    this.#syncer = parts.syncer;
    this.#hooks = parts.hooks;
    this.#settlements = new Settlements(refiller, config.maxKeys, () => this.rounds.wake());
    refiller.onReply((lease, leased, dry, stale) => this.#replied(lease, leased, dry, stale));
    this.rounds = new BookRounds(owner, this.#holding, this.#settlements, parts);
  }

  /** Tokens held in leases now. */
  held(): number {
    let held = 0;
    for (const lease of this.#holding) held += lease.tokens;
    return held;
  }

  /** Expires `lease`'s grants due by `nowMs`; their tokens are handed back with its next op. */
  expire(lease: Lease, nowMs: number): void {
    this.#counters.tokensExpired += expireGrants(lease, nowMs);
  }

  /** Tokens `lease` can still spend now. */
  live(lease: Lease): number {
    this.expire(lease, this.#clock.now());
    return lease.tokens;
  }

  /** `lease` left the table (evicted): what it holds goes back to the store. */
  evicted(lease: Lease): void {
    if (lease.detached) return;
    lease.detached = true;
    this.#holding.delete(lease);
    drainLease(lease);
    // A key that owes nothing (a sparse key's take) costs no call: with a table full of them,
    // every new key evicted one, and each eviction paid a guarded, queued call that sent nothing.
    if (owes(lease) || lease.debt > 0) this.#settlements.settle(lease);
  }

  /** `lease`'s optimistic charge was refused by the breaker: sent again once the store answers. */
  chargeRefused(lease: Lease): void {
    this.#settlements.chargeRefused(lease);
  }

  /** `reset`: the lease is dropped with nothing handed back (its global buckets are deleted too). */
  forget(lease: Lease): void {
    lease.detached = true;
    this.#holding.delete(lease);
    lease.grants.length = 0;
    lease.tokens = 0;
    lease.head = undefined;
  }

  /** `block`: deny until `untilMs` here, and hand the lease's tokens back. */
  block(lease: Lease, untilMs: number): void {
    if (untilMs > lease.blockedUntilMs) lease.blockedUntilMs = untilMs;
    if (untilMs > lease.deniedUntilMs) lease.deniedUntilMs = untilMs;
    drainLease(lease);
    this.#settlements.settle(lease);
  }

  /**
   * `setLimits`: hands back what `leases` hold and reports their spends to the old `limits`' buckets
   * (on carriers of those limits, however late), in one guarded attempt (a settle per key timed
   * 10,000 out together and opened the breaker).
   */
  drainAll(leases: Iterable<Lease>, limits: readonly LimitSpec[]): void {
    this.#settlements.settleAll(carveOff(leases, limits));
  }

  /**
   * Hands back every lease's tokens (one forced attempt for them all), waits for them, the store
   * calls still out and the requests' `calls` at most `closeTimeoutMs` from the call (going through
   * 100,000 keys takes time of its own), and stops the timer. A call that timed out is still out:
   * Redis grants its lease when a pause ends, and that grant goes back too, in an attempt of its own.
   */
  async close(leases: readonly Lease[], clearTable: () => void, calls: Promise<void>): Promise<void> {
    const startedAtMs = this.#clock.now();
    this.rounds.stop();
    const waitMs = () => Math.max(1, this.#config.closeTimeoutMs - (this.#clock.now() - startedAtMs));
    const owed = this.#settlements.closing(leases, waitMs);
    this.#holding.clear();
    clearTable();
    const handBack = this.#settlements.handBack(owed, waitMs());
    const left = this.#syncer?.fleet.leave();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs())));
    // Calls still out first: each hands its grant back as it lands, adding to what is pending.
    const done = Promise.allSettled([...this.#refiller.landing(), left, calls]).then(() =>
      this.#settlements.drained(),
    );
    await Promise.race([done, deadline]);
    clearTimeout(timer);
    // Its timeout ends with the wait, its failure reported before close() resolves: the deadline's
    // timer ran first 2 times in 10, and the event went to no listener.
    await handBack;
    this.#hotClock.release();
  }

  #replied(lease: Lease, leased: number, dry: boolean, stale: Lease | undefined): void {
    if (stale !== undefined) {
      // Asked under limits `setLimits` has replaced: its grant (on a carrier of those limits) goes
      // back, as the leases setLimits drained did (a lease of 20 under a capacity lowered to 2 was
      // spent here), and its denial says nothing of the new limits.
      lease.deniedUntilMs = lease.blockedUntilMs;
      this.#settlements.lateGrant(stale, leased);
      return;
    }
    if (lease.detached || this.#clock.now() < lease.blockedUntilMs) {
      this.#settlements.lateGrant(lease, leased);
      return;
    }
    // With the sync, a key that asked the store is the next sync's to weigh, leased or not: a
    // sparse key's take would otherwise keep it out of the sync however busy it became.
    if (leased > 0 || this.#syncer !== undefined) {
      this.#holding.add(lease);
      this.rounds.wake();
    }
    if (dry) this.#denied(lease);
    // A waiter that the policy decided (a try timed out) sleeps its wait beside a grant landed since.
    if (leased > 0) this.#hooks.granted(lease.key);
  }

  /**
   * With the sync, a key at its limit that the store turned away, or granted tokens that left
   * the bucket with none, spends what it holds, then waits for its
   * share at the next sync instead of asking again: the refill until then is the rest of the
   * fleet's share, which their syncs will take. "At its limit" is this instance's demand times
   * the fleet at or above the refill rate; below it, a dry moment is only a burst, and the key
   * asks again when the store's wait is over.
   */
  #denied(lease: Lease): void {
    const syncer = this.#syncer;
    if (syncer === undefined || !syncer.atLimit(lease, this.#clock.now())) return;
    const nextTickAtMs = this.rounds.nextAtMs;
    if (lease.deniedUntilMs < nextTickAtMs) lease.deniedUntilMs = nextTickAtMs;
  }
}
