import type { Lease } from './lease.js';

/** What the book tells the rest of the limiter, and asks of its cold path. */
export interface BookHooks {
  /** The live fleet count changed. */
  fleet(live: number): void;
  /** Leases for up to `room` keys first seen since the last round (`ColdPath.promote`). */
  promote(room: number): readonly Lease[];
  /** A grant landed on the lease of a key: its sleeping waiter, if any, is woken (`acquire`). */
  granted(key: string): void;
}
