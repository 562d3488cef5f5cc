/** How long a leased token stays good; the README's accuracy bound grows with it. */
export const DEFAULT_LEASE_TTL_MS = 1000;
/** A batch aims to last this long at the key's observed rate. */
export const DEFAULT_HORIZON_MS = 100;
/** Smallest batch a refill asks for. */
export const DEFAULT_MIN_BATCH = 1;
/**
 * Largest batch a refill asks for. High on purpose: a batch is already held to the key's rate ×
 * horizon, its fair share and its share of what the global bucket has left; this only stops a
 * hot key from draining its lease faster than a refill comes back (1,000 lasted 100 µs at 9 M/s,
 * shorter than one round trip, so every batch ended in a wait).
 */
export const DEFAULT_MAX_BATCH = 100_000;
/**
 * Instances assumed to share a limit when the user does not say: one instance asks for at
 * most capacity / 4 at once, and for at most a quarter of what the global bucket has left.
 */
export const DEFAULT_ASSUMED_INSTANCES = 4;
/** Fraction of a grant at which a hot-path admission starts the next refill. */
export const DEFAULT_LOW_WATER = 0.25;
/** Refills (and refunds) in flight at once across all keys: a bound against a stampede, well above what one connection keeps busy. */
export const DEFAULT_MAX_CONCURRENT_REFILLS = 1024;
/** How often the coarse clock is read; 0 reads the clock on every decision. */
export const DEFAULT_COARSE_TICK_MS = 5;
/** Longest `acquire` waits when the caller gives no `maxWaitMs`. */
export const DEFAULT_MAX_WAIT_MS = 10_000;
/** How long `close()` waits for refunds before giving up on them. */
export const DEFAULT_CLOSE_TIMEOUT_MS = 1000;
