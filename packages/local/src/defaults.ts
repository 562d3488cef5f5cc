// Every default of @tiered-limiter/local, in one place, each with the reason for its value.

/** Keys a limiter (or `MemoryStore`) tracks at most before it forgets the least recently used one. */
export const DEFAULT_MAX_KEYS = 100_000;

/**
 * Largest `maxKeys` accepted: a typo such as `1e12` fails at construction rather than as an
 * out-of-memory crash hours later.
 */
export const MAX_MAX_KEYS = 2 ** 24;

/** How long a request waits for the shared store before its limit's failure policy decides. */
export const DEFAULT_TIMEOUT_MS = 20;

/** Consecutive store failures that open the circuit breaker. */
export const DEFAULT_FAILURE_THRESHOLD = 3;

/** How long an open breaker waits before letting one probe call through. */
export const DEFAULT_COOLDOWN_MS = 250;

/** `retryAfterMs` of a denial made by the `closed` policy: when to come back and try. */
export const DEFAULT_CLOSED_RETRY_AFTER_MS = 1000;

/** How long a leased token stays good at its holder. */
export const DEFAULT_LEASE_TTL_MS = 1000;

/**
 * How much longer than a lease lives at its holder the store holds its tokens against the
 * bucket's room, at least: the holder's clock may be stale by this much (a thread descheduled, a
 * container throttled for a CFS period of 100 ms) and its hand-back of expired tokens may still
 * be on its way, and neither may let the bucket refill room that a spendable token still holds.
 * The grace is `max(this, ttlMs / 2)`; a dead instance's tokens come back after `ttlMs + grace`.
 */
export const MIN_LEASE_GRACE_MS = 250;

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

/** Store calls in flight at once across all keys: a bound against a stampede, not a throttle. */
export const DEFAULT_MAX_CONCURRENT_REFILLS = 1024;

/** Longest `acquire` waits when the caller gives no `maxWaitMs`. */
export const DEFAULT_MAX_WAIT_MS = 10_000;

/** How long `close()` waits for the store to take back unspent leased tokens. */
export const DEFAULT_CLOSE_TIMEOUT_MS = 1000;

/** Keys a `MemoryStore` holds at most; the least recently used is forgotten (as full) past it. */
export const DEFAULT_MEMORY_STORE_MAX_KEYS = 1_000_000;

/**
 * Store calls a second a fleet's periodic syncs may make in all: each instance syncs every
 * `instances ÷ 200` s. 200 calls of up to 64 key-ops are about a tenth of one Redis core.
 */
export const DEFAULT_FLEET_CALLS_PER_SECOND = 200;
