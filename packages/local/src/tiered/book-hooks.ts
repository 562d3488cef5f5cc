import type { Clock } from '@tiered-limiter/core';
import type { HotClock } from './hot-clock.js';
import type { Lease } from './lease.js';
import type { TieredConfig } from './options.js';
import type { Refiller } from './refiller.js';
import type { TieredCounters } from './stats.js';
import type { Syncer } from './sync.js';

/** What the book tells the rest of the limiter, and asks of its cold path. */
export interface BookHooks {
  /** The live fleet count changed. */
  fleet(live: number): void;
  /** Leases for up to `room` keys first seen since the last round (`ColdPath.promote`). */
  promote(room: number): readonly Lease[];
  /** A grant landed on the lease of a key: its sleeping waiter, if any, is woken (`acquire`). */
  granted(key: string): void;
}

/**
 * What a lease book and its rounds are built from (`wireTiered`): one bundle, so that the book and
 * `BookRounds` take the same parts by the same names.
 */
export interface BookParts {
  readonly refiller: Refiller;
  readonly counters: TieredCounters;
  readonly clock: Clock;
  readonly config: TieredConfig;
  readonly hotClock: HotClock;
  /** The periodic sync, or `undefined` with `sync: false` (the rounds sweep instead). */
  readonly syncer: Syncer | undefined;
  /** The store's call group of a key, so that a round visits keys in the order its calls go. */
  readonly groupOf: ((key: string) => number) | undefined;
  readonly hooks: BookHooks;
}
