import { type Clock, ConfigError, internal, type LimitSpec } from '@tiered-limiter/core';
import type { LRUCache } from 'lru-cache';
import type { Listened } from '../emit-safely.js';
import { GuardedStore } from '../guard/guarded-store.js';
import { InFlight } from '../in-flight.js';
import { lruTable } from '../table.js';
import type { BookRounds } from './book-rounds.js';
import { ColdPath } from './cold-path.js';
import { ColdStart } from './cold-start.js';
import { FirstSightings, MIN_SIGHTING_WINDOW_MS } from './first-sightings.js';
import { OPS_PER_CALL } from './fleet-options.js';
import { HotClock } from './hot-clock.js';
import { KeyAdmin } from './key-admin.js';
import { Lease } from './lease.js';
import { LeaseBook } from './lease-book.js';
import { OptimisticStarts } from './optimistic-starts.js';
import { resolveTieredOptions, type TieredConfig, type TieredLimiterOptions } from './options.js';
import { Refiller } from './refiller.js';
import { TieredCounters } from './stats.js';
import { Syncer } from './sync.js';

const { assertClock, assertLimits, tightestWhenFull } = internal;

/** What a `TieredLimiter` asks of itself while its parts are wired. */
export interface TieredHooks {
  /** The limiter: events are emitted on it, and the lease book lets it go when it is collected. */
  readonly owner: Listened;
  /** The limits in force (they change with `setLimits`); `undefined` while the limiter is built. */
  limits(): readonly LimitSpec[] | undefined;
  /** A lease left the table. */
  evicted(lease: Lease): void;
  /** The live fleet outgrew the declared one. */
  fleet(info: { instances: number; declared: number | undefined }): void;
  /** A grant landed on `key`'s lease: a waiter sleeping on the key may take it now. */
  granted(key: string): void;
}

/** A two-tier limiter's parts, wired one way: hot path → cold path → refiller → guard → store. */
export interface TieredParts {
  readonly config: TieredConfig;
  readonly clock: Clock;
  /** What the hot path reads the time from: the shared clock's slot while busy, else `clock`. */
  readonly hotClock: HotClock;
  readonly store: GuardedStore;
  readonly counters: TieredCounters;
  readonly refiller: Refiller;
  readonly leases: LRUCache<string, Lease>;
  readonly book: LeaseBook;
  /** The book's timer and rounds; the hot path asks it to `catchUp`. */
  readonly rounds: BookRounds;
  readonly syncer: Syncer | undefined;
  readonly admin: KeyAdmin;
  readonly cold: ColdPath;
  /** Optimistic cold start: the hot path's answer for a key with no lease, before any call. */
  readonly optimistic: OptimisticStarts;
  /** Keys seen once lately, with no lease. */
  readonly sightings: FirstSightings;
  /** Requests, management calls and optimistic charges at the store: `close()` waits for them. */
  readonly calls: InFlight;
  /** The lease of `key`, made (empty) if there is none. */
  leaseFor(key: string): Lease;
}

/** Checks `options` (a `ConfigError` names the one refused) and builds the parts of a limiter. */
export function wireTiered(
  options: TieredLimiterOptions,
  hooks: TieredHooks,
): { limits: readonly LimitSpec[]; parts: TieredParts } {
  if (options === null || typeof options !== 'object') throw new ConfigError('options', options, 'an object');
  const clock = options.clock === undefined ? performance : assertClock('clock', options.clock);
  const limits = assertLimits('limits', options.limits);
  const config = resolveTieredOptions(options, limits);
  // The limiter's own limits once it holds them (setLimits changes them); these until then.
  const limitsNow = () => hooks.limits() ?? limits;
  const counters = new TieredCounters();
  const store = new GuardedStore(config.storeOptions, limits, clock, hooks.owner);
  const refiller = new Refiller(store, config, clock, counters, limitsNow);
  const leases = lruTable<string, Lease>(config.maxKeys, (lease) => hooks.evicted(lease));
  const hotClock = new HotClock(
    options.clock === undefined && !config.exactClock,
    clock.now(),
    () => store.counts.lease,
  );
  const syncer =
    config.sync === undefined
      ? undefined
      : new Syncer(config, refiller, store.store, config.sync.budget, config.instanceId, clock);
  const book: LeaseBook = new LeaseBook(hooks.owner, {
    refiller,
    counters,
    clock,
    config,
    hotClock,
    syncer,
    groupOf: store.store.groupOf?.bind(store.store),
    hooks: {
      fleet: (live) => {
        store.fleetSize(live);
        if (config.instances !== undefined && live > config.instances)
          hooks.fleet({ instances: live, declared: config.instances });
      },
      promote: (room) => cold.promote(room),
      granted: hooks.granted,
    },
  });
  const leaseFor = (key: string): Lease => {
    let lease = leases.get(key);
    if (lease === undefined) {
      lease = new Lease(key, clock.now(), tightestWhenFull(limitsNow()));
      leases.set(key, lease);
    }
    return lease;
  };
  const calls = new InFlight();
  const keyParts = { store, book, leases, clock, refiller, limits: limitsNow, leaseFor, calls };
  const madeAtMs = clock.now();
  const coldStart =
    config.coldStart === undefined
      ? undefined
      : new ColdStart(config.coldStart, (nowMs) =>
          syncer === undefined ? madeAtMs : syncer.fleet.creditSince(nowMs),
        );
  // A first heartbeat now, not at the first tick: that round, and the refills before it, are sized
  // by the live count (a limiter joining nine others leased 700 of 1,000 tokens, sized as if alone),
  // and optimistic credit waits for it. An idle limiter's first tick then sends none (`IDLE_BEAT_MS`).
  if (syncer !== undefined) book.rounds.beat();
  const sightings = new FirstSightings(
    config.maxKeys,
    () => Math.max(MIN_SIGHTING_WINDOW_MS, config.timing.ttlMs),
    clock.now(),
    store.store.opsPerCall ?? OPS_PER_CALL,
  );
  const cold: ColdPath = new ColdPath(keyParts, refiller, config.timing, sightings);
  return {
    limits,
    parts: {
      config,
      clock,
      hotClock,
      store,
      counters,
      refiller,
      leases,
      book,
      rounds: book.rounds,
      syncer,
      admin: new KeyAdmin(keyParts, config.timing, counters, sightings),
      cold,
      optimistic: new OptimisticStarts(keyParts, refiller, counters, coldStart, sightings),
      sightings,
      calls,
      leaseFor,
    },
  };
}

/**
 * `close()` of a limiter's parts, once the limiter has stopped taking calls: first sightings
 * forgotten, every lease handed back by the book (the table emptied once they are gathered) while
 * the store calls still out are waited on, and the guard's time spent degraded ended once that is
 * done (the hand-back may find the store back). Resolves within the book's wait.
 */
export function closeParts(parts: TieredParts): Promise<void> {
  const { leases } = parts;
  const held = [...leases.values()];
  parts.sightings.clear();
  // The listeners stay: a request made before, or a hand-back, that fails later is still reported.
  return parts.book
    .close(held, () => leases.clear(), parts.calls.close())
    .finally(() => parts.store.guard.end());
}
