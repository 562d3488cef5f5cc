import { allowDecision, type Decision, type LimitSpec } from '@tiered-limiter/core';
import type { ColdStart } from './cold-start.js';
import { type FirstSightings, seededSince } from './first-sightings.js';
import type { KeyParts } from './key-admin.js';
import type { Lease } from './lease.js';
import type { Refiller } from './refiller.js';
import type { TieredCounters } from './stats.js';
import { TurnCharges } from './turn-charges.js';

/**
 * Optimistic admissions that may wait to be charged at once: four calls' worth at `RedisStore`'s
 * default of 32 keys a call. At 64, a turn of 256 requests in flight on many keys sent most of its
 * new keys the exact way, each waiting a turn on a take (the optimistic Zipf rows at 256 in flight:
 * 487–789 k decisions a second against 789–971 k at 128); a burst of 100,000 new keys at the default
 * 20 ms timeout kept the breaker closed at 128 as at 64.
 */
const MAX_PENDING_CHARGES = 128;

/**
 * Optimistic cold start on a two-tier limiter: a key with no lease here is admitted on credit, at
 * once, and its charge leaves for the store with the callback's others (`TurnCharges`); `ColdStart`
 * keeps the spacing that bounds the fleet's extra admissions. Kept apart from the cold path, which
 * waits on the store, because it never does: the hot path asks it before anything is sent.
 */
export class OptimisticStarts {
  readonly #parts: KeyParts;
  readonly #counters: TieredCounters;
  readonly #coldStart: ColdStart | undefined;
  readonly #charges: TurnCharges;
  readonly #sightings: FirstSightings;

  constructor(
    parts: KeyParts,
    refiller: Refiller,
    counters: TieredCounters,
    coldStart: ColdStart | undefined,
    sightings: FirstSightings,
  ) {
    this.#parts = parts;
    this.#sightings = sightings;
    this.#counters = counters;
    this.#coldStart = coldStart;
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
   * A key this instance has no state for, admitted now and charged to the store in this tick's
   * flush; `undefined` when optimism does not apply (a cost above the credit, a degraded store,
   * the key's spacing not yet over).
   */
  admit(key: string, cost: number): Decision | undefined {
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
    const lease = this.#parts.leaseFor(key);
    if (seenAtMs !== undefined) seededSince(lease, seenAtMs, cost);
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
}

function noChange(): void {}
