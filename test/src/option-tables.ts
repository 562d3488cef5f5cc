import { defineLimit, type LimitOptions, type LimitSpec, type RateOptions } from '@tiered-limiter/core';
import type { RateLimitOptions } from '@tiered-limiter/http';
import type {
  AcquireOptions,
  BreakerOptions,
  ColdStartOptions,
  LeaseOptions,
  LocalFallbackOptions,
  LocalLimiterOptions,
  MemoryStoreOptions,
  RequestLimiterOptions,
  StoreLimiterOptions,
  SyncOptions,
  TieredLimiterOptions,
} from '@tiered-limiter/local';
import type {
  RedisLimiterOptions,
  RedisStoreOptions,
  RedisTieredLimiterOptions,
} from '@tiered-limiter/redis';
import { FakeClock } from './fake-clock.js';
import { nest, type OptionCase, type OptionTable } from './option-matrix.js';

/**
 * The limit of every option case: 2 tokens and a refill so slow (one token in 1,000 s) that the
 * third decision is denied on any clock, fake or real.
 */
export const TINY: LimitSpec = defineLimit({ capacity: 2, refillPerSecond: 0.001, name: 'tiny' });

const integer: OptionCase = { kind: 'integer' };
const boolean: OptionCase = { kind: 'boolean' };
const object: OptionCase = { kind: 'object' };

/** Clocks that are no clocks, or whose reading is no time. */
const clock: OptionCase = {
  kind: 'clock',
  extra: [
    { now: 5 },
    () => 0,
    { now: () => Number.NaN },
    { now: () => '5' },
    { now: () => Number.POSITIVE_INFINITY },
    {
      now() {
        throw new Error('no clock here');
      },
    },
  ],
  valid: [new FakeClock(5)],
};

/** Limits made by hand: every field must be checked, not only that the rate is a number. */
const limits: OptionCase = {
  kind: 'limits',
  required: true,
  extra: [
    { ...TINY, capacity: Number.POSITIVE_INFINITY, fillMs: Number.POSITIVE_INFINITY },
    { ...TINY, refillPerSecond: Number.NaN, refillPerMs: Number.NaN },
    { ...TINY, capacity: 1e12 },
    { ...TINY, capacity: 2.5 },
    { ...TINY, name: 'a b' },
    { ...TINY, refillPerMs: 1 },
    { name: 'x', capacity: 2, refillPerSecond: 1 },
    [TINY, { ...TINY }],
    [TINY, null],
  ],
  valid: [{ ...TINY }, [{ ...TINY }], Object.freeze([TINY])],
};

/** `fallback.*` options only mean something under the `local` policy. */
const local = () => ({ failurePolicy: 'local', fallback: { instances: 2 } });

/** Options of every limiter over a `GlobalStore` (`RequestLimiter`, `TieredLimiter`, the factories). */
export const storeLimiterOptions = {
  store: { kind: 'object', required: true, extra: [{ apply() {} }, { apply: 1, reset: 1 }] },
  limits,
  shadow: { ...boolean, extra: ['false', 'true', 'no'] },
  timeoutMs: integer,
  breaker: { ...object, valid: [false] },
  ...nest('breaker', {
    failureThreshold: integer,
    cooldownMs: integer,
  } satisfies OptionTable<BreakerOptions>),
  clock,
  failurePolicy: { kind: 'choice', required: true, extra: ['OPEN', 'fail-open', true] },
  fallback: object,
  ...nest('fallback', {
    instances: { ...integer, with: local },
    limits: { ...limits, required: false, with: local },
    maxKeys: { ...integer, with: local },
  } satisfies OptionTable<LocalFallbackOptions>),
  closedRetryAfterMs: integer,
} satisfies OptionTable<StoreLimiterOptions> & Record<string, OptionCase>;

/** Every option of `LocalLimiter`. */
export const localLimiterOptions = {
  limits,
  maxKeys: integer,
  clock,
  shadow: { ...boolean, extra: ['false'] },
} satisfies OptionTable<LocalLimiterOptions>;

/** Every option of `RequestLimiter`. */
export const requestLimiterOptions = {
  ...storeLimiterOptions,
  maxKeys: integer,
  rememberDenials: boolean,
} satisfies OptionTable<RequestLimiterOptions> & Record<string, OptionCase>;

/** Optimistic cold start needs the fleet size and a policy that may admit unasked. */
const optimistic = () => ({ coldStart: { mode: 'optimistic' }, instances: 1, failurePolicy: 'open' });

/** Every option of `TieredLimiter`. */
export const tieredLimiterOptions = {
  ...storeLimiterOptions,
  instances: integer,
  lease: object,
  ...nest('lease', {
    ttlMs: integer,
    horizonMs: integer,
    minBatch: integer,
    maxBatch: integer,
    lowWater: { kind: 'number' },
  } satisfies OptionTable<LeaseOptions>),
  maxKeys: integer,
  maxConcurrentRefills: integer,
  exactClock: boolean,
  closeTimeoutMs: integer,
  sync: { ...object, valid: [false] },
  ...nest('sync', { fleetCallsPerSecond: integer } satisfies OptionTable<SyncOptions>),
  coldStart: object,
  ...nest('coldStart', {
    mode: { kind: 'choice', required: true, extra: ['OPTIMISTIC', 'lazy', true] },
    credit: { kind: 'integer', with: optimistic },
    // The rule weighs credit against a capacity: on the 2-token proof limit it refuses the credit.
    spacingMs: { kind: 'integer', with: optimistic, alsoNamed: ['coldStart.credit'] },
  } satisfies OptionTable<ColdStartOptions>),
  instanceId: { kind: 'string', extra: ['', 'x'.repeat(201)] },
} satisfies OptionTable<TieredLimiterOptions> & Record<string, OptionCase>;

/** Every option of `MemoryStore`. */
export const memoryStoreOptions = {
  clock,
  maxKeys: integer,
} satisfies OptionTable<MemoryStoreOptions>;

/** `RedisStoreOptions['coalesce']` as an object (its type is not exported by name). */
type CoalesceOptions = Exclude<RedisStoreOptions['coalesce'], false | undefined>;

/** Every option of `RedisStore` (the client itself is given by the test: it needs a server). */
export const redisStoreOptions = {
  redis: { kind: 'object', required: true, extra: [{ defineCommand: 1 }] },
  prefix: { kind: 'string', extra: ['', 'a b', 'x'.repeat(65), '{tag}'] },
  coalesce: { ...object, valid: [false] },
  shards: integer,
  keepAfterFullMs: integer,
  ...nest('coalesce', {
    maxKeysPerCall: integer,
    maxInFlight: integer,
  } satisfies OptionTable<CoalesceOptions>),
} satisfies OptionTable<RedisStoreOptions> & Record<string, OptionCase>;

const { store: _request, ...requestOverRedis } = requestLimiterOptions;
const { store: _tiered, ...tieredOverRedis } = tieredLimiterOptions;

/** Every option of `createRedisLimiter`: the per-request limiter's, the store's instead of `store`. */
export const redisLimiterOptions = {
  ...requestOverRedis,
  ...redisStoreOptions,
} satisfies OptionTable<RedisLimiterOptions> & Record<string, OptionCase>;

/** Every option of `createTieredLimiter`: the two-tier limiter's, the store's instead of `store`. */
export const redisTieredLimiterOptions = {
  ...tieredOverRedis,
  ...redisStoreOptions,
} satisfies OptionTable<RedisTieredLimiterOptions> & Record<string, OptionCase>;

/** Every option of `acquire(key, cost, options)`, an `ArgumentError` naming it when refused. */
export const acquireOptions: OptionTable<AcquireOptions> = {
  maxWaitMs: integer,
  signal: {
    kind: 'object',
    extra: [new AbortController(), { aborted: false }, { aborted: 'no', addEventListener() {} }],
    valid: [new AbortController().signal],
  },
};

/** Every option of `defineLimit`, and its options object itself (refused as `limit`). */
export const limitOptions = {
  // `defineLimit({})` is refused for its missing `capacity`: the field, as the user writes it.
  options: { ...object, required: true, alsoNamed: ['limit', 'capacity'] },
  capacity: { ...integer, required: true, extra: [1e9 + 1, '2'] },
  refillPerSecond: { kind: 'number', required: true, extra: [1e-7, 1e9 + 1] },
  name: { kind: 'string', extra: ['', 'a b', 'x'.repeat(65), 'a:b'] },
} satisfies OptionTable<LimitOptions> & Record<string, OptionCase>;

/** Every option of `perSecond`, `perMinute` and `perHour`, their options object, and their `count`. */
export const rateOptions = {
  options: object,
  count: { ...integer, required: true },
  burst: integer,
  name: { kind: 'string', extra: ['', 'a b'] },
} satisfies OptionTable<RateOptions> & Record<string, OptionCase>;

/** A limiter of the `TINY` limit, for the middleware's `limiter` and `createLimiter`. */
export type LimiterFactory = (limits: readonly LimitSpec[]) => unknown;

/**
 * Every option of the HTTP middleware (`RateLimitOptions`, and the adapters' `handler`), and one
 * route entry. `limit`, `createLimiter` and `maxLimiters` are tried with the other two of them.
 */
export function httpOptions(make: LimiterFactory): Record<string, OptionCase> {
  const built = () => ({ limiter: undefined, limit: TINY, createLimiter: make });
  return {
    ...({
      limiter: { kind: 'object', extra: [{ consume() {} }, { limits: [TINY] }] },
      limit: {
        kind: 'limits',
        with: () => ({ limiter: undefined, createLimiter: make }),
        alsoNamed: ['limiter'],
        valid: [TINY, [TINY], () => TINY],
      },
      createLimiter: { kind: 'function', required: true, with: built },
      maxLimiters: { ...integer, with: built },
      key: { kind: 'function' },
      cost: { kind: 'function' },
      routes: object,
      skip: { kind: 'function' },
      allowList: { kind: 'array', extra: [['not an address'], [1]] },
      trustProxy: integer,
      ipv6Subnet: { ...integer, valid: [false] },
      statusCode: { ...integer, extra: [200, 600] },
      message: { kind: 'body' },
      problem: { kind: 'body' },
      failClosedStatus: { kind: 'choice', extra: [500] },
      onExceeded: { kind: 'function' },
      requestPropertyName: { kind: 'string', extra: [''] },
      skipFailedRequests: boolean,
      skipSuccessfulRequests: boolean,
      standardHeaders: { kind: 'choice', extra: [true, 'draft-7'] },
      legacyHeaders: { ...boolean, extra: ['false'] },
      degradedHeader: { kind: 'string', extra: ['a b', ''], valid: [false] },
    } satisfies OptionTable<RateLimitOptions>),
    handler: { kind: 'function' },
    "routes['/p']": {
      kind: 'object',
      path: ['routes', '/p'],
      extra: [{ limiter: 5 }, { cost: 1 }, { limiter: make([TINY]), cost: 0 }, { limit: TINY }],
      // A route with a `limit` of its own needs the middleware's `createLimiter`.
      alsoNamed: ['createLimiter'],
    },
  };
}
