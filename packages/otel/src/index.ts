export type { InstrumentStoreOptions } from './instrument-store.js';
export { instrumentStore, operationOf } from './instrument-store.js';
export { ATTRIBUTES, METRICS, STORE_DURATION_BUCKETS_S } from './names.js';
export type {
  LimiterObservation,
  ObservableLimiter,
  ObservedStats,
  ObserveLimiterOptions,
} from './observe-limiter.js';
export { observeLimiter } from './observe-limiter.js';
