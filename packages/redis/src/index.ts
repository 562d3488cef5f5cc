export type { RedisLimiterOptions, RedisTieredLimiterOptions } from './factories.js';
export { createRedisLimiter, createTieredLimiter } from './factories.js';
export {
  assertPrefix,
  bucketKey,
  bucketKeys,
  DEFAULT_PREFIX,
  KEY_TTL_MARGIN_MS,
  keyTag,
  MAX_TAG_LENGTH,
} from './keys.js';
export {
  RECOMMENDED_CONNECT_TIMEOUT_MS,
  RECOMMENDED_RECONNECT_BASE_MS,
  RECOMMENDED_RECONNECT_MAX_MS,
  recommendedClusterOptions,
  recommendedRedisOptions,
  recommendedRetryStrategy,
} from './recommended-options.js';
export type { RedisStoreOptions } from './redis-store.js';
export { RedisStore } from './redis-store.js';
