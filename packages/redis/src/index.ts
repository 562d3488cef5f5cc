export type { LuaScript, RedisClientAdapter, RedisClientLike, ScriptCall } from './client/adapter.js';
export type { CoalesceOptions } from './coalesce-options.js';
export type { CoalescerStats } from './coalescer.js';
export {
  DEFAULT_MAX_IN_FLIGHT,
  DEFAULT_MAX_KEYS_PER_CALL,
  DEFAULT_READY_TIMEOUT_MS,
  MAX_SHARDS,
} from './defaults.js';
export type { RedisLimiterOptions, RedisTieredLimiterOptions } from './factories.js';
export { createRedisLimiter, createTieredLimiter } from './factories.js';
// keys.ts is the key layout the README documents for operators, so all of it is public.
export * from './keys.js';
export { whenReady } from './ready.js';
export {
  recommendedNodeRedisClusterOptions,
  recommendedNodeRedisOptions,
  recommendedNodeRedisReconnectStrategy,
  recommendedNodeRedisSentinelOptions,
  recommendedSentinelOptions,
  recommendedValkeyClusterOptions,
  recommendedValkeyOptions,
  recommendedValkeySentinelOptions,
} from './recommended-clients.js';
export {
  RECOMMENDED_CONNECT_TIMEOUT_MS,
  RECOMMENDED_RECONNECT_BASE_MS,
  RECOMMENDED_RECONNECT_MAX_MS,
  recommendedClusterOptions,
  recommendedRedisOptions,
  recommendedRetryStrategy,
  reconnectOnReadonly,
} from './recommended-options.js';
export type { RedisStoreOptions } from './redis-store.js';
export { RedisStore } from './redis-store.js';
