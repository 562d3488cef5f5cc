import { randomUUID } from 'node:crypto';
import { ConfigError, internal, type LimitSpec } from '@tiered-limiter/core';
import {
  DEFAULT_ASSUMED_INSTANCES,
  DEFAULT_CLOSE_TIMEOUT_MS,
  DEFAULT_HORIZON_MS,
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_LOW_WATER,
  DEFAULT_MAX_BATCH,
  DEFAULT_MAX_CONCURRENT_REFILLS,
  DEFAULT_MIN_BATCH,
  MIN_LEASE_GRACE_MS,
} from '../defaults.js';
import type { LocalFallbackOptions } from '../guard/failure-policy.js';
import { STORE_LIMITER_OPTION_NAMES, type StoreLimiterOptions } from '../guard/guarded-store.js';
import { resolveMaxKeys } from '../table.js';
import type { BatchPolicy } from './batch-size.js';
import {
  type ColdStartConfig,
  type ColdStartOptions,
  resolveColdStart,
  resolveSync,
  type SyncConfig,
  type SyncOptions,
  syncPeriodMs,
} from './fleet-options.js';

const { assertBoolean, assertInRange, assertInteger, assertKnownOptions, assertObject, smallestCapacity } =
  internal;

/** Every top-level option of `TieredLimiter` (`coarseTickMs`, removed, is refused with its own reason). */
const TIERED_OPTION_NAMES: readonly string[] = [
  ...STORE_LIMITER_OPTION_NAMES,
  'instances',
  'lease',
  'maxKeys',
  'maxConcurrentRefills',
  'exactClock',
  'closeTimeoutMs',
  'sync',
  'coldStart',
  'instanceId',
  'coarseTickMs',
];

/** Lease options of `TieredLimiter`. */
export interface LeaseOptions {
  /**
   * Milliseconds a leased token stays good at this instance; unused tokens then go back to the
   * global bucket. The store holds leased tokens against the bucket's room for longer (see
   * `MIN_LEASE_GRACE_MS`), so the fleet's bound does not grow with it: shorter only returns
   * idle tokens sooner, longer costs fewer round trips for bursty keys.
   * @default 1000
   */
  ttlMs?: number;
  /** A batch aims to last this many ms at the key's observed rate. @default 100 */
  horizonMs?: number;
  /**
   * Smallest batch a refill asks for. At 1, a key's first request here is a take of its own and
   * the key keeps no lease until its next request (most keys limited per user or address are seen
   * once in a long while); above 1, a key's first request leases this many already.
   * @default 1
   */
  minBatch?: number;
  /** Largest batch a refill asks for. @default 100_000 */
  maxBatch?: number;
  /**
   * Fraction of a grant at which a lease admission starts the next refill in the background,
   * so that the lease is refilled before it runs dry.
   * @default 0.25
   */
  lowWater?: number;
}

/** Options of `TieredLimiter`. */
export interface TieredLimiterOptions extends StoreLimiterOptions {
  /**
   * Instances expected to share the limit. Caps one lease at `capacity / instances` (fair
   * share), sizes batches near the limit, and, for `failurePolicy: 'local'`, divides the limit
   * for the fallback bucket unless `fallback` says otherwise. With the periodic sync it is a
   * floor: a larger live count sizes all of these instead.
   * @default 4 for batch sizing; the local fallback requires it (or `fallback.limits`)
   */
  instances?: number;
  /** Lease sizing and lifetime. */
  lease?: LeaseOptions;
  /**
   * Keys with a lease at most; the least recently used is evicted and its lease returned. Keys
   * seen once (a take and a mark, no lease) are marked in two generations of at most this many
   * each, about 75 bytes a mark. @default 100_000
   */
  maxKeys?: number;
  /** Store ops in flight at once across all keys. @default 1024 */
  maxConcurrentRefills?: number;
  /**
   * Read the clock on every decision, never the process's shared clock thread. By default the
   * hot path reads `performance.now()` and joins the thread (a read of about a nanosecond, at the
   * CPU of a thread waking every millisecond) only while it makes 250,000 decisions a second or
   * more (`stats().clockThread`). A custom `clock` is always read directly.
   * @default false
   */
  exactClock?: boolean;
  /** How long `close()` waits for the store to take back unspent tokens, in ms from the call. @default 1000 */
  closeTimeoutMs?: number;
  /**
   * The periodic sync: one coalesced op per held key every `instances ÷ fleetCallsPerSecond`
   * seconds, carrying hand-backs, spends and the next lease; `false` for leases refilled on demand
   * (at a low-water mark) and hand-backs sent as they expire.
   * @default { fleetCallsPerSecond: 200 }
   */
  sync?: SyncOptions | false;
  /** How a key this instance has no state for is decided. @default { mode: 'exact' } */
  coldStart?: ColdStartOptions;
  /** This instance's name in the store's registry of live instances. @default a random UUID */
  instanceId?: string;
}

/** `TieredLimiterOptions`, checked, with every default filled in. */
export interface TieredConfig {
  /**
   * How long a grant lives here (`ttlMs`), how long the store holds it (`holdMs`: `ttlMs` plus
   * the grace), how much refill a lease may borrow (`aheadMs`: the sync period, else 0), and how
   * much longer a grant that spans more than one sync interval lives per interval (`spanMs`: the
   * interval, else 0). Mutable: with the periodic sync, all four follow the sync period.
   */
  readonly timing: { ttlMs: number; holdMs: number; aheadMs: number; spanMs: number };
  readonly lowWater: number;
  readonly batch: BatchPolicy;
  readonly maxKeys: number;
  readonly maxConcurrentRefills: number;
  readonly exactClock: boolean;
  readonly closeTimeoutMs: number;
  /** How often expired grants are swept and handed back. */
  readonly sweepEveryMs: number;
  /** The options the guarded store gets: the local fallback divided by `instances`. */
  readonly storeOptions: StoreLimiterOptions;
  /** The declared fleet size (a floor for the live one). */
  readonly instances: number | undefined;
  /** How much longer than a lease lives here the store holds it, beyond a sync period. */
  readonly graceMs: number;
  /** The periodic sync, or `undefined` for refills on demand. */
  readonly sync: SyncConfig | undefined;
  /** Optimistic cold start, or `undefined` for exact. */
  readonly coldStart: ColdStartConfig | undefined;
  readonly instanceId: string;
}

/** Checks every option of a `TieredLimiter` (a `ConfigError` names the one refused) and fills in defaults. */
export function resolveTieredOptions(
  options: TieredLimiterOptions,
  limits: readonly LimitSpec[],
): TieredConfig {
  assertKnownOptions('', options, TIERED_OPTION_NAMES);
  const instances =
    options.instances === undefined ? undefined : assertInteger('instances', options.instances, 1, 1_000_000);
  const fallback =
    options.fallback === undefined
      ? undefined
      : assertObject<LocalFallbackOptions>('fallback', options.fallback);
  const storeOptions: StoreLimiterOptions =
    options.failurePolicy === 'local' && instances !== undefined && fallback?.limits === undefined
      ? { ...options, fallback: { ...fallback, instances: fallback?.instances ?? instances } }
      : options;
  const lease = options.lease === undefined ? {} : assertObject<LeaseOptions>('lease', options.lease);
  assertKnownOptions('lease', lease, ['ttlMs', 'horizonMs', 'minBatch', 'maxBatch', 'lowWater']);
  const sync = resolveSync(options.sync);
  if (sync !== undefined && lease.ttlMs !== undefined) {
    throw new ConfigError(
      'lease.ttlMs',
      lease.ttlMs,
      'absent with the periodic sync (a lease lives one sync period); pass sync: false to set it',
    );
  }
  const ttlMs = assertInteger('lease.ttlMs', lease.ttlMs ?? DEFAULT_LEASE_TTL_MS, 1, 3_600_000);
  const graceMs = Math.max(MIN_LEASE_GRACE_MS, Math.ceil(ttlMs / 2));
  const instanceId = options.instanceId ?? randomUUID();
  if (typeof instanceId !== 'string' || instanceId.length === 0 || instanceId.length > 200) {
    throw new ConfigError('instanceId', instanceId, 'a string of 1 to 200 characters');
  }
  const minBatch = assertInteger('lease.minBatch', lease.minBatch ?? DEFAULT_MIN_BATCH, 1);
  const maxBatch = assertInteger('lease.maxBatch', lease.maxBatch ?? DEFAULT_MAX_BATCH, minBatch);
  const competitors = instances ?? DEFAULT_ASSUMED_INSTANCES;
  const capacity = smallestCapacity(limits);
  if ((options as { coarseTickMs?: unknown }).coarseTickMs !== undefined) {
    throw new ConfigError(
      'coarseTickMs',
      (options as { coarseTickMs?: unknown }).coarseTickMs,
      'absent: the hot path reads a shared clock thread now; pass exactClock: true to read the clock per decision',
    );
  }
  return {
    timing: { ttlMs, holdMs: ttlMs + graceMs, aheadMs: 0, spanMs: 0 },
    instances,
    graceMs,
    sync,
    // With the sync, a key's first lease lives at most about a period plus a little: the bound on
    // spacing uses the longest period a fleet of `instances` would sync at.
    coldStart: resolveColdStart(
      options.coldStart,
      limits,
      instances,
      sync === undefined ? ttlMs : Math.ceil(syncPeriodMs(instances ?? 1, sync.budget) * 1.1) + 50,
      options.failurePolicy,
    ),
    instanceId,
    lowWater: assertInRange('lease.lowWater', lease.lowWater ?? DEFAULT_LOW_WATER, 0, 1),
    batch: {
      minBatch,
      maxBatch,
      horizonMs: assertInteger('lease.horizonMs', lease.horizonMs ?? DEFAULT_HORIZON_MS, 1, 3_600_000),
      fairShare: Math.max(1, Math.floor(capacity / competitors)),
      competitors,
    },
    maxKeys: resolveMaxKeys(options.maxKeys),
    maxConcurrentRefills: assertInteger(
      'maxConcurrentRefills',
      options.maxConcurrentRefills ?? DEFAULT_MAX_CONCURRENT_REFILLS,
      1,
      100_000,
    ),
    exactClock: options.exactClock === undefined ? false : assertBoolean('exactClock', options.exactClock),
    closeTimeoutMs: assertInteger(
      'closeTimeoutMs',
      options.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS,
      0,
      60_000,
    ),
    sweepEveryMs: Math.max(1, Math.min(250, Math.floor(ttlMs / 4))),
    storeOptions,
  };
}
