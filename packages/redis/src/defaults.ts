/**
 * Most bucket keys one coalesced call carries: about 0.2 ms of server time. Half the 64:
 * with 64 requests waiting, one call took them all and the second slot stood idle while Redis
 * ran it; calls of 32 keep two or more in flight (RequestLimiter, 100,000 keys, 64 in flight:
 * 96–101 k decisions/s at 64 × 2, 134–145 k at 32 × 4).
 */
export const DEFAULT_MAX_KEYS_PER_CALL = 32;
/**
 * Coalesced calls in flight at once to one destination (the server, or a Cluster master): four
 * of 32 keys carry as many ops at once as two of 64 did.
 */
export const DEFAULT_MAX_IN_FLIGHT = 4;
/** Most virtual shards (`RedisStore`'s `shards`): one per Cluster slot. */
export const MAX_SHARDS = 16_384;
/** How long `whenReady` waits for a client by default, in ms. */
export const DEFAULT_READY_TIMEOUT_MS = 10_000;
