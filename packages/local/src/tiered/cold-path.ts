import { allowDecision, type Decision, denyDecision, StoreTimeoutError } from '@tiered-limiter/core';
import { decisionOf } from '../guard/guarded-store.js';
import { type FirstSightings, seededSince } from './first-sightings.js';
import type { KeyParts } from './key-admin.js';
import { type Lease, spend } from './lease.js';
import { rememberedDenial } from './lease-limit.js';
import type { TieredConfig } from './options.js';
import { refillWithin } from './refill-within.js';
import type { Refiller } from './refiller.js';
import { touchSharedClock } from './shared-clock.js';

/** Refills one request waits through before it stops losing the race to other waiters. */
const MAX_ATTEMPTS = 4;

/**
 * The two-tier limiter's path for a request the hot path could not decide: spend from the lease
 * what the hot path could not (a cost across grants, an expired head), else wait for the call in
 * flight or a new one (a lease, or a take for a sparse key), else the policy. Each request's
 * outcome is its own call's: a take's token, or the reply's denial. Optimistic cold start, which
 * never waits, is `OptimisticStarts`'.
 */
export class ColdPath {
  readonly #parts: KeyParts;
  readonly #refiller: Refiller;
  /** The limiter's lease timing, read for what a lease may borrow now (it follows the sync). */
  readonly #timing: TieredConfig['timing'];
  readonly #sightings: FirstSightings;

  constructor(
    parts: KeyParts,
    refiller: Refiller,
    timing: TieredConfig['timing'],
    sightings: FirstSightings,
  ) {
    this.#parts = parts;
    this.#sightings = sightings;
    this.#refiller = refiller;
    this.#timing = timing;
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
        lease = seededSince(this.#parts.leaseFor(key), seenAtMs, cost);
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
        const result = attempt === 0 ? await refill : await refillWithin(refill, leftMs, guard.timeoutMs);
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
      return seenAtMs === undefined ? undefined : seededSince(this.#parts.leaseFor(key), seenAtMs, cost);
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
    const result = await refillWithin(take, leftMs, guard.timeoutMs);
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
      if (seenAtMs !== undefined) leases.push(seededSince(this.#parts.leaseFor(key), seenAtMs));
    }
    return leases;
  }
}
