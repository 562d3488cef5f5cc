/** Keys a `LocalLimiter` tracks at most before it forgets the least recently used one. */
export const DEFAULT_MAX_KEYS = 100_000;

/**
 * Largest `maxKeys` a `LocalLimiter` accepts. lru-cache allocates its index arrays up front
 * (a few tens of bytes a key), so a typo such as `1e12` fails at construction rather than as
 * an out-of-memory crash.
 */
export const MAX_MAX_KEYS = 2 ** 24;
