import {
  allowDecision,
  type BucketReply,
  type Decision,
  denyDecision,
  type LimitSpec,
  StoreTimeoutError,
} from '@tiered-limiter/core';
import { decisionOf } from '../guard/guarded-store.js';
import type { GuardResult } from '../guard/store-guard.js';
import type { ColdStart } from './cold-start.js';
import type { FirstSightings } from './first-sightings.js';
import type { KeyParts } from './key-admin.js';
import { type Lease, spend } from './lease.js';
import { rememberedDenial } from './lease-limit.js';
import type { TieredConfig } from './options.js';
import type { Refiller } from './refiller.js';
import { touchSharedClock } from './shared-clock.js';
import type { TieredCounters } from './stats.js';
import { TurnCharges } from './turn-charges.js';

/**
 * Optimistic admissions that may wait to be charged at once: two calls' worth at `RedisStore`'s
 * default of 32 keys a call. 256 still let a burst at 256 in flight open the breaker (one run in two).
 */
const MAX_PENDING_CHARGES = 64;

/** Refills one request waits through before it stops losing the race to other waiters. */
const MAX_ATTEMPTS = 4;

/**
 * The two-tier limiter's path for a request the hot path could not decide: spend from the lease
 * what the hot path could not (a cost across grants, an expired head), else wait for the call in
 * flight or a new one (a lease, or a take for a sparse key), else the policy; and optimistic cold
 * start. Each request's outcome is its own call's: a take's token, or the reply's denial.
 */
export class ColdPath {
  readonly #parts: KeyParts;
  readonly #refiller: Refiller;
  readonly #counters: TieredCounters;
  readonly #coldStart: ColdStart | undefined;
  /** The limiter's lease timing, read for what a lease may borrow now (it follows the sync). */
  readonly #timing: TieredConfig['timing'];
  readonly #charges: TurnCharges;
  readonly #sightings: FirstSightings;

  constructor(
    parts: KeyParts,
    refiller: Refiller,
    counters: TieredCounters,
    coldStart: ColdStart | undefined,
    timing: TieredConfig['timing'],
    sightings: FirstSightings,
  ) {
    this.#parts = parts;
    this.#sightings = sightings;
    this.#refiller = refiller;
    this.#counters = counters;
    this.#coldStart = coldStart;
    this.#timing = timing;
    // Counted until answered: close() waits for them. A charge still on its lease once the
    // attempt is over was refused (sent, it left the lease): the book sends it again.
    this.#charges = new TurnCharges((leases, sending) =>
      parts.calls.track(
        refiller.settler.settleAll(leases, sending).then(() => {
          for (const lease of leases) if (lease.debt > 0 && !lease.detached) parts.book.chargeRefused(lease);
        }),
      ),
    );
  }

  /**
   * The hot path's remembered denial of `lease` at `nowMs`; with `onRealClock`, the real clock
   * is read first (the shared clock thread may read early), and `undefined` when it is over.
   */
  remembered(lease: Lease, cost: number, nowMs: number, onRealClock: boolean): Decision | undefined {
    let now = nowMs;
    if (onRealClock) {
      touchSharedClock();
      now = this.#parts.clock.now();
      if (now >= lease.deniedUntilMs) return undefined;
    }
    lease.asked += cost;
    lease.requests++;
    return this.#parts.store.count(rememberedDenial(lease, cost, now, this.#timing.aheadMs, 'lease'));
  }

  /**
   * New limits weighed against optimistic cold start's rule before anything changes (`setLimits`):
   * throws a `ConfigError` naming the option they break, else returns what puts them in force here.
   */
  weighLimits(limits: readonly LimitSpec[]): () => void {
    return this.#coldStart?.weigh(limits) ?? noChange;
  }

  /** `lease` left the table (evicted, reset, closed): optimistic cold start remembers a recent start. */
  left(lease: Lease): void {
    if (lease.claimedAtMs === Number.NEGATIVE_INFINITY) return;
    this.#coldStart?.left(lease.key, lease.claimedAtMs, this.#parts.clock.now());
  }

  /**
   * Takes `cost` tokens for `key` once the hot path has said it cannot. Never rejects. Its refills
   * share one budget, the guard's timeout from the call: on a Redis answering each within the
   * timeout, a request that lost every refill's tokens to other waiters waited four of them (30
   * waiters at a 60 ms timeout: 127–133 ms). Past it, the failure policy decides. A stall of this
   * process the guard saw lengthens the budget (`StoreGuard.deadlineOf`): the answers waited in the socket.
   */
  async consume(key: string, cost: number): Promise<Decision> {
    const { calls } = this.#parts;
    // Counted until decided (so every return below awaits): close() waits for it.
    calls.enter();
    try {
      const { store, book, clock } = this.#parts;
      const startedAt = performance.now();
      let lease = this.#parts.leases.get(key);
      // A minimum batch above 1 is a wish to lease at once, the first request included.
      if (lease === undefined && this.#refiller.batching.policy.minBatch === 1) {
        const seenAtMs = this.#sightings.take(key, clock.now());
        if (seenAtMs === undefined) return await this.#firstHit(key, cost);
        lease = this.#leaseSince(key, seenAtMs, cost);
      }
      lease ??= this.#parts.leaseFor(key);
      if (lease.firstCost === 0) lease.firstCost = cost;
      for (let attempt = 0; ; attempt++) {
        if (lease.detached) {
          // close() began while this request waited: its lease went back, the grant its refill
          // brought too. A take decides it: a fresh lease leased a batch in a closed limiter, which
          // nothing handed back (199 of 200 tokens lost).
          if (calls.closed) return await this.#closedTake(key, cost, startedAt);
          // Evicted while this request waited: its tokens went back; carry on with a fresh lease.
          lease = this.#parts.leaseFor(key);
        }
        const now = clock.now();
        book.expire(lease, now);
        const tier = attempt === 0 ? 'lease' : 'global';
        if (spend(lease, cost)) {
          return store.count(
            allowDecision(lease.tokens + lease.globalRemaining, lease.resetMs, lease.limit, tier),
          );
        }
        if (now < lease.deniedUntilMs) {
          lease.asked += cost;
          lease.requests++;
          return store.count(rememberedDenial(lease, cost, now, this.#timing.aheadMs, tier));
        }
        if (attempt === MAX_ATTEMPTS) {
          // Other waiters keep winning the tokens this request's refills bring: say so, briefly.
          return store.count(denyDecision(1, lease.tokens, lease.resetMs, lease.limit, 'global'));
        }
        const { guard } = store;
        // The first refill is bounded by the guard (one joined was sent earlier still).
        const leftMs =
          attempt === 0 ? Number.POSITIVE_INFINITY : guard.deadlineOf(startedAt) - performance.now();
        if (leftMs <= 0) return store.byPolicy(key, cost, new StoreTimeoutError(guard.timeoutMs));
        lease.pendingCost += cost;
        const need = Math.max(1, cost - lease.tokens);
        // A call already out for the key (another request's refill, a sync) asked for its own need.
        const joined = lease.refill !== undefined;
        const refill = this.#refiller.refill(lease, need);
        const result = attempt === 0 ? await refill : await within(refill, leftMs, guard.timeoutMs);
        lease.pendingCost -= cost;
        if (!result.ok) return store.byPolicy(key, cost, result.error);
        if (lease.taken >= cost) {
          lease.taken -= cost;
          lease.asked += cost;
          lease.requests++;
          return store.count(decisionOf(result.value, this.#parts.limits(), 'global'));
        }
        // A sync that asked nothing (a quiet key's hand-back) answers whether a token would pass,
        // taking none: a request that joined it asks for its own (300 admitted from a bucket of 100).
        // A denial says the wait for what its call asked: a request needing more that joined a
        // smaller ask asks for its own (a cost of 3 was told 500 ms, one token's wait, for 2,500).
        const reply = result.value;
        if (reply.granted === 0 && !reply.ok && !(joined && need > 1)) {
          // What this instance holds for the key is left too (a cost of 6 said 3 with 2 more held).
          const spec = this.#parts.limits()[reply.limitIndex] ?? lease.limit;
          return store.count(
            denyDecision(reply.retryAfterMs, reply.remaining + lease.tokens, reply.resetMs, spec, 'global'),
          );
        }
      }
    } finally {
      calls.leave();
    }
  }

  /**
   * A key's first hit here (issue 11, sparse keys): a take of its own and a mark, no lease. Most
   * keys of a service limited per user or per address are seen once in a long while, and a lease
   * for each cost a table slot, 420–520 bytes of heap and a sync op. A denial makes the lease at
   * once, to remember it; so does the key's next hit within the window (`FirstSightings`).
   */
  async #firstHit(key: string, cost: number): Promise<Decision> {
    const { store, leases } = this.#parts;
    this.#sightings.mark(key, this.#parts.clock.now());
    const limits = this.#parts.limits();
    const result = await this.#refiller.first(key, cost, () => {
      // A request on the key, or a sync round, made its lease while this one was out: it learns for itself.
      if (leases.peek(key) !== undefined) return undefined;
      const seenAtMs = this.#sightings.take(key, this.#parts.clock.now());
      return seenAtMs === undefined ? undefined : this.#leaseSince(key, seenAtMs, cost);
    });
    if (!result.ok) return store.byPolicy(key, cost, result.error);
    return store.count(decisionOf(result.value, limits, 'global'));
  }

  /**
   * A request whose lease `close()` handed back while it waited: a take of its own, within what is
   * left of its budget, and no lease.
   */
  async #closedTake(key: string, cost: number, startedAt: number): Promise<Decision> {
    const { store } = this.#parts;
    const { guard } = store;
    const leftMs = guard.deadlineOf(startedAt) - performance.now();
    if (leftMs <= 0) return store.byPolicy(key, cost, new StoreTimeoutError(guard.timeoutMs));
    const limits = this.#parts.limits();
    const take = this.#refiller.first(key, cost, () => undefined);
    const result = await within(take, leftMs, guard.timeoutMs);
    if (!result.ok) return store.byPolicy(key, cost, result.error);
    return store.count(decisionOf(result.value, limits, 'global'));
  }

  /**
   * Leases, for the sync round about to start, for at most `room` of the keys first seen since the
   * last round: the room its last call has spare, so a fleet's few keys are weighed as a lease
   * made at their first hit would be, and a burst of new keys adds no call to the round.
   */
  promote(room: number): Lease[] {
    const leases: Lease[] = [];
    const now = this.#parts.clock.now();
    this.#sightings.age(now);
    for (const key of this.#sightings.recent()) {
      if (leases.length >= room) break;
      const seenAtMs = this.#sightings.take(key, now);
      if (seenAtMs !== undefined) leases.push(this.#leaseSince(key, seenAtMs));
    }
    return leases;
  }

  /**
   * The lease of `key`, first seen at `seenAtMs`: its demand counts from then, the first hit as
   * one request of `cost` (the mark keeps no cost: a hit's own is the best guess, else 1), as if
   * the lease had been made at the first hit.
   */
  #leaseSince(key: string, seenAtMs: number, cost = 1): Lease {
    const lease = this.#parts.leaseFor(key);
    if (lease.firstCost !== 0) return lease;
    lease.asked = cost;
    lease.requests = 1;
    lease.firstCost = cost;
    lease.lastRefillAtMs = seenAtMs;
    lease.syncedAtMs = seenAtMs;
    return lease;
  }

  /**
   * Optimistic cold start: a key this instance has no state for, admitted now and charged to the
   * store in this tick's flush; `undefined` when optimism does not apply (a cost above the credit,
   * a degraded store, the key's spacing not yet over).
   */
  optimistic(key: string, cost: number): Decision | undefined {
    const coldStart = this.#coldStart;
    const { store, clock } = this.#parts;
    if (coldStart === undefined || cost > coldStart.credit || store.guard.degraded) return undefined;
    // Credit is worth giving while its charge can leave soon: past that, charges queued ahead of
    // the requests that wait on the store time them out (a burst of 100,000 new keys opened the
    // breaker on a healthy store), and a new key waits on a take instead.
    if (this.#charges.pending >= MAX_PENDING_CHARGES) return undefined;
    const now = clock.now();
    if (!coldStart.mayStart(key, now)) return undefined;
    // A key first taken the exact way (while too many charges waited) and back now: its mark
    // becomes this lease, seeded from that first hit, as its next hit's lease would be. Left
    // behind, the mark outlived the key's lease and counted it as seen once (39,026 such marks
    // after a pass over 100,000 new keys at 64 in flight).
    const seenAtMs = this.#sightings.take(key, now);
    const lease = seenAtMs === undefined ? this.#parts.leaseFor(key) : this.#leaseSince(key, seenAtMs, cost);
    lease.claimedAtMs = now;
    if (lease.firstCost === 0) lease.firstCost = cost;
    lease.debt += cost;
    lease.asked += cost;
    lease.requests++;
    this.#charges.add(lease);
    this.#counters.tokensOptimistic += cost;
    const spec = lease.limit;
    return store.count(allowDecision(spec.capacity - cost, 0, spec, 'local'));
  }
}

function noChange(): void {}

/**
 * A refill's result, or a timeout once `leftMs` have passed (the call goes on, and its grant lands
 * on the lease). As the guard's timer does, the timer first lets the poll phase read an answer
 * already in the socket.
 */
function within(
  refill: Promise<GuardResult<BucketReply>>,
  leftMs: number,
  timeoutMs: number,
): Promise<GuardResult<BucketReply>> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<GuardResult<BucketReply>>((resolve) => {
    const timedOut = () => resolve({ ok: false, error: new StoreTimeoutError(timeoutMs) });
    timer = setTimeout(() => setImmediate(timedOut), leftMs);
  });
  return Promise.race([refill, late]).finally(() => clearTimeout(timer));
}
