import type { Attributes, Meter } from '@opentelemetry/api';
import {
  type BucketOp,
  type BucketReply,
  type CallerWait,
  type GlobalStore,
  internal,
  type LimitSpec,
} from '@tiered-limiter/core';
import { assertAttributes, assertMeter, assertOptions } from './checks.js';
import { ATTRIBUTES, METRICS, STORE_DURATION_BUCKETS_S } from './names.js';

const { assertStore } = internal;

/** Options of `instrumentStore`. */
export interface InstrumentStoreOptions {
  /**
   * Attributes added to every data point (e.g. `{ 'db.system.name': 'redis' }`).
   * @default {}
   */
  attributes?: Attributes;
}

/**
 * The operation a `BucketOp` is, for the `tiered_limiter.store.operation` attribute. An op that is
 * no object reads as `peek`: the store refuses it, and its data point says so in `error.type`.
 */
export function operationOf(op: BucketOp): 'reserve' | 'take' | 'settle' | 'peek' {
  const read = op as Partial<BucketOp> | null | undefined;
  if (read?.reserve !== undefined) return 'reserve';
  if (read?.take !== undefined && read.take > 0) return 'take';
  if ((read?.reports?.length ?? 0) > 0 || (read?.credit ?? 0) > 0 || (read?.debit ?? 0) > 0) return 'settle';
  return 'peek';
}

/**
 * Wraps a `GlobalStore` so that every call is timed into the histogram
 * `tiered_limiter.store.operation.duration` (seconds; attribute `tiered_limiter.store.operation`:
 * `reserve` for a lease refill, `take`, `settle`, `peek`, `reset`, `heartbeat`, `leave`; and
 * `error.type` when the call failed). The store's `heartbeat`, `leave`, `opsPerCall` and `groupOf`,
 * which the periodic sync uses, pass through. The refill latency of a `TieredLimiter` is the `reserve` series. The
 * wrapper adds a clock read and a record per call, nothing on the limiter's hot path.
 *
 * @example
 * import { metrics } from '@opentelemetry/api';
 * import { TieredLimiter } from '@tiered-limiter/local';
 * import { RedisStore } from '@tiered-limiter/redis';
 * import { instrumentStore } from '@tiered-limiter/otel';
 *
 * const store = instrumentStore(new RedisStore({ redis }), metrics.getMeter('my-service'));
 * const limiter = new TieredLimiter({ store, limits: perSecond(100), failurePolicy: 'local' });
 */
export function instrumentStore(
  store: GlobalStore,
  meter: Meter,
  options: InstrumentStoreOptions = {},
): GlobalStore {
  // The wrapper has an apply and a reset whatever it wraps: a limiter's own check of its store
  // would pass it, and every request would go to the failure policy.
  assertStore(store);
  assertMeter(meter, ['createHistogram']);
  const base = assertAttributes(assertOptions<InstrumentStoreOptions>(options, ['attributes']).attributes);
  const duration = meter.createHistogram(METRICS.storeDuration, {
    description: 'Duration of calls to the shared store',
    unit: 's',
    advice: { explicitBucketBoundaries: [...STORE_DURATION_BUCKETS_S] },
  });
  const timed = <T>(operation: string, call: () => Promise<T>): Promise<T> => {
    const start = performance.now();
    const seconds = () => (performance.now() - start) / 1000;
    // A store throws into no one's path through the wrapper: a request's `.catch` would miss it.
    let pending: Promise<T>;
    try {
      pending = call();
    } catch (error) {
      pending = Promise.reject(error);
    }
    return pending.then(
      (value) => {
        duration.record(seconds(), { ...base, [ATTRIBUTES.operation]: operation });
        return value;
      },
      (error: unknown) => {
        duration.record(seconds(), {
          ...base,
          [ATTRIBUTES.operation]: operation,
          [ATTRIBUTES.errorType]: errorTypeOf(error),
        });
        throw error;
      },
    );
  };
  const wrapped: { -readonly [K in keyof GlobalStore]: GlobalStore[K] } = {
    // The caller's wait goes on: without it a queueing store (`RedisStore`) sent an op whose caller
    // had given up, to count its tokens after the failure policy had decided the request.
    apply: (op: BucketOp, wait?: CallerWait): Promise<BucketReply> =>
      timed(operationOf(op), () => store.apply(op, wait)),
    reset: (key: string, limits: readonly LimitSpec[]): Promise<void> =>
      timed('reset', () => store.reset(key, limits)),
  };
  // What the periodic sync reads of the store passes through: without the heartbeat a wrapped
  // fleet kept its declared size, without `opsPerCall` its period assumed 32 ops a call, and
  // without `groupOf` its rounds on a Cluster went out a script call per key.
  const heartbeat = store.heartbeat;
  if (heartbeat !== undefined) {
    wrapped.heartbeat = (instance: string, ttlMs: number): Promise<number> =>
      timed('heartbeat', () => heartbeat.call(store, instance, ttlMs));
  }
  const leave = store.leave;
  if (leave !== undefined) {
    wrapped.leave = (instance: string): Promise<void> => timed('leave', () => leave.call(store, instance));
  }
  Object.defineProperty(wrapped, 'opsPerCall', { get: () => store.opsPerCall, enumerable: true });
  const groupOf = store.groupOf;
  if (groupOf !== undefined) wrapped.groupOf = (key: string): number => groupOf.call(store, key);
  return wrapped;
}

/**
 * The `error.type` of a failed call: the error's `code` where it is a string, else its class's
 * name, else OpenTelemetry's fallback `_OTHER`. A numeric `code` hid the name (a `TypeError` read
 * `Error`), and a rejection with no error at all read as one.
 */
function errorTypeOf(error: unknown): string {
  const read = error as { code?: unknown; name?: unknown } | null | undefined;
  if (typeof read?.code === 'string' && read.code !== '') return read.code;
  if (typeof read?.name === 'string' && read.name !== '') return read.name;
  return '_OTHER';
}
