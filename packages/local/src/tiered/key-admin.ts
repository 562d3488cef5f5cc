import {
  allowDecision,
  type BucketOp,
  type Clock,
  type Decision,
  denyDecision,
  type LimitSpec,
  StoreWithdrawnError,
} from '@tiered-limiter/core';
import type { LRUCache } from 'lru-cache';
import { assertBlockMs } from '../block-list.js';
import { checkedReply, decisionOf, type GuardedStore } from '../guard/guarded-store.js';
import type { InFlight } from '../in-flight.js';
import { assertTokens } from '../management.js';
import type { FirstSightings } from './first-sightings.js';
import { drainLease, type Lease } from './lease.js';
import type { LeaseBook } from './lease-book.js';
import type { SettleOptions } from './lease-op.js';
import type { TieredConfig } from './options.js';
import type { Refiller } from './refiller.js';
import type { TieredCounters } from './stats.js';

/** What a two-tier limiter's management calls and cold path need of it. */
export interface KeyParts {
  readonly store: GuardedStore;
  readonly book: LeaseBook;
  readonly leases: LRUCache<string, Lease>;
  readonly clock: Clock;
  readonly refiller: Refiller;
  /** Calls at the store made for requests and management calls: `close()` waits for them. */
  readonly calls: InFlight;
  limits(): readonly LimitSpec[];
  leaseFor(key: string): Lease;
}

/**
 * The management calls of `TieredLimiter` (issue 12), beside its hot path: each one store op, or
 * none. A store failure resolves the policy's decision (`peek`) or `false` (the others).
 */
export class KeyAdmin {
  readonly #parts: KeyParts;
  /** The limiter's lease timing, read for what a take may borrow now (it follows the sync). */
  readonly #timing: TieredConfig['timing'];
  readonly #counters: TieredCounters;
  /** Keys seen once lately: `reset` forgets the key's mark too. */
  readonly #sightings: FirstSightings;

  constructor(
    parts: KeyParts,
    timing: TieredConfig['timing'],
    counters: TieredCounters,
    sightings: FirstSightings,
  ) {
    this.#parts = parts;
    this.#timing = timing;
    this.#counters = counters;
    this.#sightings = sightings;
  }

  /** The global bucket plus this instance's lease, taking nothing; shadowed as a request would be. */
  peek(key: string): Promise<Decision> {
    return this.#parts.calls.track(this.#look(key)).then((decision) => this.#parts.store.looked(decision));
  }

  async #look(key: string): Promise<Decision> {
    const { store, leases, book, clock } = this.#parts;
    const blocked = leases.peek(key);
    const now = clock.now();
    if (blocked !== undefined && now < blocked.blockedUntilMs) {
      // A blocked key is denied here, with no store call, as a request would be.
      return denyDecision(blocked.blockedUntilMs - now, 0, blocked.resetMs, blocked.limit, 'local');
    }
    const limits = this.#parts.limits();
    const result = await store.guard.run((wait) => {
      const op = this.#lookOp(key, limits);
      return store.store
        .apply(op, wait)
        .then(checkedReply)
        .catch((error: unknown) => {
          this.#lookFailed(key, op, error);
          throw error;
        });
    });
    if (!result.ok) return store.policy.peek(key, result.error);
    const lease = leases.peek(key);
    const held = lease === undefined ? 0 : book.live(lease);
    const reply = result.value;
    const spec = limits[reply.limitIndex] ?? limits[0]!;
    return held > 0
      ? allowDecision(reply.remaining + held, reply.resetMs, spec, 'global')
      : decisionOf(reply, limits, 'global');
  }

  /**
   * The look's op. A request's take or lease may borrow `aheadMs` of refill (the sync period): so
   * may the look. What optimistic cold start admitted on credit and has not charged yet rides as
   * its debit, read after it in the same script: the charge leaves after the turn that gave the
   * credit, and a look made in that turn (or ahead of it in the store's call, as ops that callers
   * wait on go first) read the bucket up to the credit too full.
   */
  #lookOp(key: string, limits: readonly LimitSpec[]): BucketOp {
    const aheadMs = this.#timing.aheadMs;
    const op: { -readonly [K in keyof BucketOp]: BucketOp[K] } = { key, limits };
    if (aheadMs > 0) op.aheadMs = aheadMs;
    const lease = this.#parts.leases.peek(key);
    if (lease !== undefined && lease.debt > 0) {
      op.debit = lease.debt;
      lease.debt = 0;
    }
    return op;
  }

  /** A look's op failed: a debit the store never saw (withdrawn unsent) is owed again, else lost, as a charge's is. */
  #lookFailed(key: string, op: BucketOp, error: unknown): void {
    const debit = op.debit ?? 0;
    if (debit === 0) return;
    const lease = this.#parts.leases.peek(key);
    if (error instanceof StoreWithdrawnError && lease !== undefined) lease.debt += debit;
    else this.#counters.tokensUnreported += debit;
  }

  /**
   * Forgets `key` here (its lease dropped, nothing handed back; its first-sighting mark, or a first
   * hit's take still out would make the lease again with its denial at the reply) and in the store.
   */
  reset(key: string): Promise<boolean> {
    this.#sightings.forget(key);
    const { store, leases, book, calls } = this.#parts;
    const lease = leases.peek(key);
    if (lease !== undefined) book.forget(lease);
    leases.delete(key);
    const limits = this.#parts.limits();
    return calls.track(store.guard.run(() => store.store.reset(key, limits))).then((result) => result.ok);
  }

  /**
   * Gives `tokens` back to the global buckets of `key`, never past their room. The key's spends
   * ride first, so the reward lands in the room they free, and a denial this instance remembers
   * for the key is forgotten (the bucket may have tokens now), unless the reward fails.
   */
  reward(key: string, tokens: number): Promise<boolean> {
    const credit = assertTokens(tokens);
    return this.#adjust(this.#parts.leaseFor(key), { credit });
  }

  /**
   * Takes `tokens` from the global buckets of `key` regardless (at most a capacity into debt).
   * What this instance holds on lease goes back in the same op, ahead of the debit: a penalty that
   * puts the bucket in debt then denies here at once, as on every other tier, rather than after
   * the lease is spent (17 more admitted from a lease of 20). A denial this instance remembers
   * for the key is forgotten, unless the penalty fails: its wait is longer now (it said 500 ms
   * where the store says 1,500).
   */
  penalty(key: string, tokens: number): Promise<boolean> {
    const debit = assertTokens(tokens);
    const lease = this.#parts.leaseFor(key);
    drainLease(lease);
    return this.#adjust(lease, { debit });
  }

  /**
   * A reward or penalty of `lease`'s key: its remembered denial no longer says its wait, so it is
   * forgotten, and so is the denial of any reply to a call asked for before this one (the store
   * may have decided it first: kept, it turned the key away for 980 ms with a token in the
   * bucket). If the op fails, nothing changed and the denial stays, or the next request would go
   * to the failing store and its policy would decide (`open` admitted one from an empty bucket),
   * until the op lands after all.
   */
  #adjust(lease: Lease, adjustment: SettleOptions): Promise<boolean> {
    const deniedUntilMs = lease.deniedUntilMs;
    lease.deniedUntilMs = lease.blockedUntilMs;
    lease.forgotAsk = this.#parts.refiller.asks;
    // An op that timed out on its way may land after all: the denial kept again goes then (kept,
    // it turned the key away here for its whole wait, 1,000 s in the test, with the token in the store).
    let late = false;
    const landedLate = () => {
      late = true;
      if (lease.deniedUntilMs === deniedUntilMs) lease.deniedUntilMs = lease.blockedUntilMs;
    };
    const settle = this.#parts.refiller.settler.settle(lease, adjustment, landedLate);
    // Counted until answered: close() waits for it.
    return this.#parts.calls.track(settle).then((landed) => {
      if (!landed && !late && deniedUntilMs > lease.deniedUntilMs) lease.deniedUntilMs = deniedUntilMs;
      return landed;
    });
  }

  /** Denies `key` here for `ms` with no round trip; its leased tokens go back to the store. */
  block(key: string, ms: number): void {
    const { book, clock } = this.#parts;
    book.block(this.#parts.leaseFor(key), clock.now() + assertBlockMs(ms));
  }
}
