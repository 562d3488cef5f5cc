import type { Clock, LimitSpec } from '@tiered-limiter/core';
import type { BookHooks } from './book-hooks.js';
import { BookTimer } from './book-timer.js';
import { inCallGroupOrder } from './call-groups.js';
import { IDLE_BEAT_MS } from './fleet-registry.js';
import type { ClockHold, HotClock } from './hot-clock.js';
import { drainLease, expireGrants, type Lease } from './lease.js';
import { carveOff, forgetReleased, owes, owesHandBack } from './lease-reports.js';
import type { TieredConfig } from './options.js';
import type { Refiller } from './refiller.js';
import { RoundPacer } from './round-pacer.js';
import { Settlements } from './settlements.js';
import { releaseSharedClock } from './shared-clock.js';
import type { TieredCounters } from './stats.js';
import type { Syncer } from './sync.js';

/**
 * The lease lifecycle of a two-tier limiter, beside its hot path: leases that hold tokens, the
 * sweep that expires them and hands expired tokens back, eviction, `block`, `reset` and
 * `close()`. Its timer holds it only weakly, so a limiter dropped without `close()` is still
 * garbage-collected (and then releases the shared clock).
 */
export class LeaseBook {
  readonly #holding = new Set<Lease>();
  /** What leases on their way out owe the store, and `close()`'s hand-back. */
  readonly #settlements: Settlements;
  readonly #refiller: Refiller;
  readonly #counters: TieredCounters;
  readonly #clock: Clock;
  readonly #config: TieredConfig;
  readonly #timer: BookTimer<LeaseBook>;
  readonly #hotClock: HotClock;
  readonly #syncer: Syncer | undefined;
  readonly #groupOf: ((key: string) => number) | undefined;
  readonly #hooks: BookHooks;
  /** The pace of the rounds the timer starts: a slice a turn, the next as a late one ends. */
  readonly #rounds: RoundPacer;
  /** The timer waits `IDLE_BEAT_MS`, not a period: the sync holds no key and nothing is owed. */
  #idle = false;

  constructor(
    owner: object,
    refiller: Refiller,
    counters: TieredCounters,
    clock: Clock,
    config: TieredConfig,
    hotClock: HotClock,
    syncer: Syncer | undefined,
    groupOf: ((key: string) => number) | undefined,
    hooks: BookHooks,
  ) {
    this.#refiller = refiller;
    this.#counters = counters;
    this.#clock = clock;
    this.#config = config;
    this.#hotClock = hotClock;
    this.#syncer = syncer;
    this.#groupOf = groupOf;
    this.#hooks = hooks;
    this.#settlements = new Settlements(refiller, config.maxKeys, () => this.#wake());
    refiller.onReply((lease, leased, dry, stale) => this.#replied(lease, leased, dry, stale));
    this.#timer = new BookTimer<LeaseBook>(this, LeaseBook.#onTimer, clock, this.#periodMs());
    dropped.register(owner, { timer: this.#timer, clock: hotClock.hold }, this);
    this.#rounds = new RoundPacer(clock, () => this.#periodMs(), {
      visit: (lease, nowMs) => this.#visit(lease, nowMs),
      flush: () => this.#refiller.sendSyncs(),
      running: () => this.#timer.running,
      ended: (tookMs) => syncer?.roundTook(tookMs),
      again: () => this.#tick(),
    });
  }

  /** The timer's tick, and the ms to the next; static, so the timer holds no closure over the book. */
  static #onTimer(book: LeaseBook): number {
    book.#tick();
    return book.#nextDelayMs();
  }

  /**
   * How long the timer waits for its next tick: a period, or, with the sync holding no key and
   * nothing owed, the idle beat's interval (a wake-up is what an idle limiter costs: DECISIONS).
   */
  #nextDelayMs(): number {
    const periodMs = this.#periodMs();
    if (this.#syncer === undefined) return periodMs;
    this.#idle = this.#holding.size === 0 && this.#settlements.settled;
    return this.#idle ? Math.max(periodMs, IDLE_BEAT_MS) : periodMs;
  }

  /** Brings an idle timer's next tick to a period from now: a key just held is synced before its grant runs out. */
  #wake(): void {
    if (!this.#idle) return;
    this.#idle = false;
    this.#timer.bringForward(this.#periodMs());
  }

  /** The ms between ticks while the book has work: a sync period, or the sweep's. */
  #periodMs(): number {
    return this.#syncer?.periodMs ?? this.#config.sweepEveryMs;
  }

  /**
   * The hot path's call every few thousand reads of `performance.now()`: reviews its clock if the
   * tick is a period late. A loop that never yields holds every timer (denials and lease hits answer
   * synchronously, a `MemoryStore` in microtasks), and its decisions read `performance.now()` until
   * it yields, sync or not: on Redis once a denial ends (5–6 s at a token per 6 s); in memory, never.
   */
  catchUp(nowMs: number): void {
    const periodMs = this.#periodMs();
    if (this.#timer.overdue(nowMs, periodMs)) this.#hotClock.reviewUnlessWithin(nowMs, periodMs);
  }

  /**
   * Tells the store this instance is alive and reads the live count (the `fleet` event when it
   * outgrew the declared one): each tick's, and the first, as the limiter is made.
   */
  beat(idle = false): void {
    void this.#syncer?.beat(this.#clock.now(), idle).then((live) => {
      if (live !== undefined) this.#hooks.fleet(live);
    });
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
    this.#timer.stop();
    dropped.unregister(this);
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
      this.#wake();
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
    const nextTickAtMs = this.#timer.nextAtMs;
    if (lease.deniedUntilMs < nextTickAtMs) lease.deniedUntilMs = nextTickAtMs;
  }

  /** The sweep, or the sync of every held key a slice at a time (`RoundPacer`); a beat every tick. */
  #tick(): void {
    if (!this.#timer.running) return;
    if (!this.#rounds.mayStart()) {
      // A round may outlast the registration (slices waiting on a slow store): still counted.
      this.beat();
      return;
    }
    // A tick a busy loop held up fires just after the hot path's own review (`catchUp`).
    this.#hotClock.reviewUnlessWithin(this.#clock.now(), this.#periodMs() / 2);
    const syncer = this.#syncer;
    if (syncer !== undefined) {
      for (const lease of this.#hooks.promote(syncer.room(this.#holding.size))) this.#holding.add(lease);
      syncer.round(this.#holding.size);
      this.beat(this.#holding.size === 0 && this.#settlements.settled);
    }
    const groupOf = this.#groupOf;
    this.#rounds.start(
      groupOf === undefined ? [...this.#holding] : inCallGroupOrder([...this.#holding], groupOf),
    );
    this.#settlements.retry();
  }

  /** A round's work on one held lease: its sync, or its sweep. Returns the call it waits on. */
  #visit(lease: Lease, nowMs: number): Promise<unknown> | undefined {
    // Evicted, reset or closed since the round began.
    if (!this.#holding.has(lease)) return undefined;
    this.expire(lease, nowMs);
    forgetReleased(lease, nowMs - (this.#config.timing.holdMs - this.#config.timing.ttlMs));
    const syncer = this.#syncer;
    if (syncer !== undefined) {
      if (syncer.keeps(lease, nowMs) || lease.refill !== undefined) {
        // A call already out for the key (a refill) is waited on; the sync's own op waits with
        // the slice's others for `flush`.
        const out = lease.refill;
        this.#counters.tokensExpired += syncer.sync(lease, nowMs);
        return out;
      }
      this.#holding.delete(lease);
    } else if (lease.tokens === 0 && lease.grants.length === 0) {
      this.#holding.delete(lease);
    } else if (lease.refill === undefined && owesHandBack(lease)) {
      this.#settlements.settle(lease);
    }
    return undefined;
  }
}

/** Limiters dropped without `close()`: their timer stops and the shared clock is released. */
const dropped = new FinalizationRegistry<{ timer: BookTimer<LeaseBook>; clock: ClockHold }>((held) => {
  held.timer.stop();
  if (held.clock.held) releaseSharedClock();
});
