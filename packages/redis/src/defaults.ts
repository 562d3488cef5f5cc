/** Most bucket keys one coalesced call carries: about half a millisecond of server time. */
export const DEFAULT_MAX_KEYS_PER_CALL = 64;
/** Coalesced calls in flight at once to one destination (the server, or a Cluster master). */
export const DEFAULT_MAX_IN_FLIGHT = 2;
/** Most virtual shards (`RedisStore`'s `shards`): one per Cluster slot. */
export const MAX_SHARDS = 16_384;
/** How long `whenReady` waits for a client by default, in ms. */
export const DEFAULT_READY_TIMEOUT_MS = 10_000;
