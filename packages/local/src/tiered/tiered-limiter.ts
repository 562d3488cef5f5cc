import { EventEmitter } from 'node:events';
import {
  allowDecision,
  ClosedError,
  type Decision,
  internal,
  type LimitSpec,
  type SyncLimiter,
} from '@tiered-limiter/core';
import { type AcquireOptions, type AcquireResult, assertAcquireOptions } from '../acquire.js';
import { emitSafely } from '../emit-safely.js';
import { AcquireLine } from './acquire-line.js';
import { type Lease, nextHead, spend } from './lease.js';
import { changeLimits } from './limit-change.js';
import type { TieredLimiterOptions } from './options.js';
import { type TieredLimiterEvents, type TieredLimiterStats, tieredStats } from './stats.js';
import { closeParts, type TieredParts, wireTiered } from './wiring.js';

const { assertCost, assertKey, assertLimits, smallestCapacity } = internal;

/** What the last-key cache holds before any key: never equal to a key, `undefined` included. */
const NO_KEY = Symbol('no key');

/**
 * The two-tier limiter: most decisions come from tokens this instance leased from the shared store,
 * with no round trip and no promise (`tryConsume`); leases come with a periodic sync (or on demand),
 * expired tokens go back, and global denials are remembered until the bucket can have tokens again.
 * The fleet admits at most `C + r·(W + T)` in any window `W`, `T` the sync period (docs/ACCURACY.md).
 * While the store is away the `failurePolicy` decides, leftover leased tokens first.
 *
 * @example
 * const limiter = new TieredLimiter({ store: new MemoryStore(), limits: perSecond(100), failurePolicy: 'open' });
 * const decision = limiter.tryConsume('user:42') ?? (await limiter.consume('user:42'));
 */
export class TieredLimiter extends EventEmitter<TieredLimiterEvents> implements SyncLimiter {
  #limits: readonly LimitSpec[];
  #maxCost: number;
  readonly #parts: TieredParts;
  // The hot path's own references, one property load away.
  readonly #leases: TieredParts['leases'];
  readonly #hotClock: TieredParts['hotClock'];
  readonly #counts: TieredParts['store']['counts'];
  readonly #waiters = new AcquireLine();
  #lastKey: string | symbol = NO_KEY;
  #lastLease: Lease | undefined;
  #denials = 0;
  /** Reads of `performance.now()` on the hot path: every 16,384th asks the book for a held-up review. */
  #clockReads = 0;
  #closed: Promise<void> | undefined;

  constructor(options: TieredLimiterOptions) {
    super();
    const { limits, parts } = wireTiered(options, {
      owner: this,
      limits: () => this.#limits,
      evicted: (lease) => this.#evicted(lease),
      fleet: (info) => emitSafely(this, 'fleet', info),
      granted: (key) => this.#waiters.wake(key),
    });
    this.#limits = limits;
    this.#maxCost = smallestCapacity(limits);
    this.#parts = parts;
    this.#leases = parts.leases;
    this.#hotClock = parts.hotClock;
    this.#counts = parts.store.counts;
  }

  /** The limits, all-or-nothing, as in force now. */
  get limits(): readonly LimitSpec[] {
    return this.#limits;
  }

  /** The declared failure policy. */
  get failurePolicy() {
    return this.#parts.store.policy.policy;
  }

  /**
   * The limits the `local` failure policy decides by while the store fails (the limits divided by
   * `instances`, or by the live count when the sync counted more, or `fallback.limits`); `undefined`
   * under `open` and `closed`. A new array when they change. The HTTP middleware announces them in
   * the headers of a fallback decision.
   */
  get fallbackLimits(): readonly LimitSpec[] | undefined {
    return this.#parts.store.policy.localLimits;
  }

  /** Whether the store is considered down (the breaker is open or probing). */
  get degraded(): boolean {
    return this.#parts.store.guard.degraded;
  }

  /**
   * The hot path: a decision from this instance's lease or remembered denial, synchronously, or
   * `undefined` when only the store can answer (then call `consume`). No promise, no timer; the
   * clock is `performance.now()`, or, while the hot path is busy, the shared clock thread's slot, a
   * memory read (`HotClock`). One allocation at most, the `Decision`: a remembered denial hands back
   * the one it gave last while every value of it still holds (a decision is read-only).
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
      if (lease === undefined) return this.#parts.optimistic.admit(key, cost);
      this.#lastKey = key;
      this.#lastLease = lease;
    }
    const view = this.#hotClock.view;
    let now: number;
    if (view === undefined) {
      now = this.#parts.clock.now();
      // A loop that never yields holds the book's timer, and with it the review that would move
      // this read to the clock thread.
      if ((++this.#clockReads & 16_383) === 0) this.#parts.rounds.catchUp(now);
    } else {
      now = view[0]!;
    }
    const grant = lease.head;
    if (grant !== undefined && grant.left >= cost && now < grant.expiresAtMs) {
      grant.left -= cost;
      grant.spent += cost;
      lease.tokens -= cost;
      lease.asked += cost;
      lease.requests++;
      if (grant.left === 0) nextHead(lease);
      return this.#admitted(lease, now);
    }
    // The head expired (a sync's new grant sits behind it) or the cost spans grants: still the
    // lease's to answer, without the promise the cold path would cost.
    if (lease.tokens > 0) {
      this.#parts.book.expire(lease, now);
      if (spend(lease, cost)) return this.#admitted(lease, now);
    }
    if (now < lease.deniedUntilMs) {
      // A clock thread starved of CPU reads early, which only keeps a denial a little past its
      // end; every 256th remembered denial checks the real clock so that it cannot keep it long.
      return this.#parts.cold.remembered(
        lease,
        cost,
        now,
        view !== undefined && (++this.#denials & 255) === 0,
      );
    }
    return undefined;
  }

  #admitted(lease: Lease, now: number): Decision {
    if (lease.tokens <= lease.lowWater && lease.refill === undefined && now >= lease.deniedUntilMs) {
      void this.#parts.refiller.refill(lease, 1, false);
    }
    const counts = this.#counts;
    counts.lease++;
    counts.allowed++;
    return allowDecision(lease.tokens + lease.globalRemaining, lease.resetMs, lease.limit, 'lease');
  }

  /**
   * Takes `cost` tokens for `key`: from the lease when it can (no round trip), else after the
   * refill in flight or a new one, else by the failure policy. Resolves a `Decision`, never
   * rejects for a store failure.
   */
  consume(key: string, cost = 1): Promise<Decision> {
    const fast = this.tryConsume(key, cost);
    return fast === undefined ? this.#parts.cold.consume(key, cost) : Promise.resolve(fast);
  }

  /**
   * Waits in line (FIFO per key, in this process) until `cost` tokens are there, for work that
   * must stay under a quota rather than be dropped (`reset`, a landed `reward` or lease grant, `block`
   * and `setLimits` cut a denial's wait short). Gives up at `maxWaitMs` (default 10 s), when `signal`
   * aborts, or when the limiter closes, and says which in the result; never rejects.
   */
  acquire(key: string, cost = 1, options: AcquireOptions = {}): Promise<AcquireResult> {
    this.#check(key);
    assertCost(cost, this.#maxCost);
    const checked = assertAcquireOptions(options);
    return this.#waiters.acquire(key, () => this.consume(key, cost), this.#parts.clock, checked);
  }

  /** What a request of cost 1 would get now, taking nothing: the global bucket (less credit) plus this lease. */
  peek(key: string): Promise<Decision> {
    this.#check(key);
    return this.#parts.admin.peek(key);
  }

  /**
   * Forgets `key` everywhere: its lease here (nothing handed back) and its global buckets. Another
   * instance that remembers a denial of the key answers it until its next sync brings the full
   * bucket, or, with `sync: false`, until the denial's wait is over (a login limit of 5 a minute:
   * up to 12 s), as `RequestLimiter.rememberDenials` does. Resolves `true` once the store did it,
   * `false` when it failed or did not answer in time (a reset still queued or on its way then may
   * run later).
   */
  reset(key: string): Promise<boolean> {
    this.#check(key);
    return this.#waiters.wakeOn(key, this.#parts.admin.reset(key));
  }

  /** Gives `tokens` back, never past the room; resolves as `penalty`; lifts a remembered denial unless `false`. */
  reward(key: string, tokens: number): Promise<boolean> {
    this.#check(key);
    return this.#waiters.wakeOn(key, this.#parts.admin.reward(key, tokens));
  }

  /**
   * Takes `tokens` from `key`'s global buckets regardless (at most a capacity into debt); this
   * instance's leased tokens of the key go back with it, and a remembered denial is lifted (its
   * wait is longer now) unless it resolves `false`. Resolves `true` once done, `false` when the
   * store failed or did not answer in time: an op still queued then was never sent, one already on
   * its way may have run.
   */
  penalty(key: string, tokens: number): Promise<boolean> {
    this.#check(key);
    return this.#parts.admin.penalty(key, tokens);
  }

  /** Denies `key` for `ms` here with no round trip; its leased tokens go back to the store. */
  block(key: string, ms: number): void {
    this.#check(key);
    this.#parts.admin.block(key, ms);
    this.#waiters.wake(key);
  }

  /**
   * Replaces the limits; leased tokens go back and the next leases follow. A limit that keeps its
   * name keeps each key's global and fallback buckets (cut to a lower capacity); a new name (an
   * unnamed limit is named by its numbers) starts full. With optimistic cold start the new limits
   * must keep its rule, as at construction (a default spacing follows them): else it throws a
   * `ConfigError` naming `coldStart.credit` or `coldStart.spacingMs`, and nothing changes.
   */
  setLimits(limits: LimitSpec | readonly LimitSpec[]): void {
    if (this.#closed !== undefined) throw new ClosedError('TieredLimiter');
    const next = assertLimits('limits', limits);
    changeLimits(this.#parts, this.#limits, next, () => {
      this.#limits = next;
      this.#maxCost = smallestCapacity(next);
    });
    this.#waiters.wakeAll();
  }

  /** Counters since the limiter was made. */
  stats(): TieredLimiterStats {
    return tieredStats(this.#parts);
  }

  /**
   * Stops the timers, hands every unspent leased token back to the store (one attempt per key,
   * past an open breaker, waiting at most `closeTimeoutMs`), ends waiting `acquire`s with
   * `closed`, and makes later calls throw `ClosedError`; waits, as long, for the store calls made
   * before it (requests, management calls, optimistic charges): its client may be closed next.
   * Always resolves within its wait. A call made before it still reports a failure on `failure`.
   */
  close(): Promise<void> {
    if (this.#closed === undefined) {
      this.#waiters.close();
      this.#forgetLast();
      this.#closed = closeParts(this.#parts);
    }
    return this.#closed;
  }

  #check(key: string): void {
    if (this.#closed !== undefined) throw new ClosedError('TieredLimiter');
    assertKey(key);
  }

  #evicted(lease: Lease): void {
    if (this.#lastLease === lease) this.#forgetLast();
    this.#parts.optimistic.left(lease);
    this.#parts.book.evicted(lease);
  }

  #forgetLast(): void {
    this.#lastKey = NO_KEY;
    this.#lastLease = undefined;
  }
}
