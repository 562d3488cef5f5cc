import type { BookParts } from './book-hooks.js';
import { BookTimer } from './book-timer.js';
import { inCallGroupOrder } from './call-groups.js';
import { IDLE_BEAT_MS } from './fleet-registry.js';
import type { ClockHold } from './hot-clock.js';
import { expireGrants, type Lease } from './lease.js';
import { forgetReleased, owesHandBack } from './lease-reports.js';
import { RoundPacer } from './round-pacer.js';
import type { Settlements } from './settlements.js';
import { releaseSharedClock } from './shared-clock.js';

/**
 * The longest the hot path reads `performance.now()` before weighing its rate for the shared clock
 * thread again (`catchUp`): at the 250,000 decisions a second that join it, 125,000 decisions, enough
 * that the rate is no noise.
 */
const HOT_REVIEW_MS = 500;

/**
 * A lease book's timer and what each tick does: the sync (or the sweep) of every held lease, a
 * slice at a time (`RoundPacer`), the heartbeat, and the retry of what leases on their way out
 * still owe; an idle limiter's timer slows to the idle beat. Apart from `LeaseBook`, which keeps
 * the held leases and their lifecycle, because nothing here runs for a request: its only call from
 * the hot path is `catchUp`, every few thousand clock reads. The timer holds it only weakly, so a
 * limiter dropped without `close()` is still garbage-collected (and then releases the shared clock).
 */
export class BookRounds {
  /** The book's held leases, the same set: the rounds go through it and drop what is done. */
  readonly #holding: Set<Lease>;
  readonly #settlements: Settlements;
  readonly #parts: BookParts;
  // Read by `catchUp`, on the hot path's every 16,384th clock read: one property load away.
  readonly #syncer: BookParts['syncer'];
  readonly #config: BookParts['config'];
  readonly #hotClock: BookParts['hotClock'];
  readonly #timer: BookTimer<BookRounds>;
  /** The pace of the rounds the timer starts: a slice a turn, the next as a late one ends. */
  readonly #rounds: RoundPacer;
  /** The timer waits `IDLE_BEAT_MS`, not a period: the sync holds no key and nothing is owed. */
  #idle = false;

  constructor(owner: object, holding: Set<Lease>, settlements: Settlements, parts: BookParts) {
    this.#holding = holding;
    this.#settlements = settlements;
    this.#parts = parts;
    const { clock, hotClock, syncer } = parts;
    this.#syncer = syncer;
    this.#config = parts.config;
    this.#hotClock = hotClock;
    this.#timer = new BookTimer<BookRounds>(this, BookRounds.#onTimer, clock, this.#periodMs());
    dropped.register(owner, { timer: this.#timer, clock: hotClock.hold }, this);
    this.#rounds = new RoundPacer(clock, () => this.#periodMs(), {
      visit: (lease, nowMs) => this.#visit(lease, nowMs),
      flush: () => parts.refiller.sendSyncs(),
      running: () => this.#timer.running,
      ended: (tookMs) => syncer?.roundTook(tookMs),
      again: () => this.#tick(),
    });
  }

  /** When the next tick is due, on the limiter's clock. */
  get nextAtMs(): number {
    return this.#timer.nextAtMs;
  }

  /** The timer's tick, and the ms to the next; static, so the timer holds no closure over the rounds. */
  static #onTimer(rounds: BookRounds): number {
    rounds.#tick();
    return rounds.#nextDelayMs();
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
  wake(): void {
    if (!this.#idle) return;
    this.#idle = false;
    this.#timer.bringForward(this.#periodMs());
  }

  /** The ms between ticks while the book has work: a sync period, or the sweep's. */
  #periodMs(): number {
    return this.#syncer?.periodMs ?? this.#config.sweepEveryMs;
  }

  /**
   * The hot path's call every few thousand reads of `performance.now()`: reviews its clock every
   * `HOT_REVIEW_MS` (or period, if shorter), and reads the shared slot as soon as the thread it
   * joined writes it. The ticks alone reviewed it: a loop that never yields holds every timer
   * (denials and lease hits answer synchronously, a `MemoryStore` in microtasks), and with 100,000
   * keys a period is 5 s, so a limiter that turned busy read `performance.now()` for 5–10 s (a
   * review to join the thread, the next to read it): the bench's many-keys rows, 16 s in, had not yet.
   */
  catchUp(nowMs: number): void {
    const hotClock = this.#hotClock;
    const periodMs = this.#periodMs();
    hotClock.reviewUnlessWithin(nowMs, periodMs < HOT_REVIEW_MS ? periodMs : HOT_REVIEW_MS);
    hotClock.adopt();
  }

  /**
   * Tells the store this instance is alive and reads the live count (the `fleet` event when it
   * outgrew the declared one): each tick's, and the first, as the limiter is made.
   */
  beat(idle = false): void {
    void this.#syncer?.beat(this.#parts.clock.now(), idle).then((live) => {
      if (live !== undefined) this.#parts.hooks.fleet(live);
    });
  }

  /** Stops the timer for good (`close()`): a limiter closed needs no finalizer. */
  stop(): void {
    this.#timer.stop();
    dropped.unregister(this);
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
    this.#hotClock.reviewUnlessWithin(this.#parts.clock.now(), this.#periodMs() / 2);
    const syncer = this.#syncer;
    if (syncer !== undefined) {
      for (const lease of this.#parts.hooks.promote(syncer.room(this.#holding.size)))
        this.#holding.add(lease);
      syncer.round(this.#holding.size);
      this.beat(this.#holding.size === 0 && this.#settlements.settled);
    }
    const groupOf = this.#parts.groupOf;
    this.#rounds.start(
      groupOf === undefined ? [...this.#holding] : inCallGroupOrder([...this.#holding], groupOf),
    );
    this.#settlements.retry();
  }

  /** A round's work on one held lease: its sync, or its sweep. Returns the call it waits on. */
  #visit(lease: Lease, nowMs: number): Promise<unknown> | undefined {
    // Evicted, reset or closed since the round began.
    if (!this.#holding.has(lease)) return undefined;
    this.#parts.counters.tokensExpired += expireGrants(lease, nowMs);
    forgetReleased(lease, nowMs - (this.#config.timing.holdMs - this.#config.timing.ttlMs));
    const syncer = this.#syncer;
    if (syncer !== undefined) {
      if (syncer.keeps(lease, nowMs) || lease.refill !== undefined) {
        // A call already out for the key (a refill) is waited on; the sync's own op waits with
        // the slice's others for `flush`.
        const out = lease.refill;
        this.#parts.counters.tokensExpired += syncer.sync(lease, nowMs);
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
const dropped = new FinalizationRegistry<{ timer: BookTimer<BookRounds>; clock: ClockHold }>((held) => {
  held.timer.stop();
  if (held.clock.held) releaseSharedClock();
});
