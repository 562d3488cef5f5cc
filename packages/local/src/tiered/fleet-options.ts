import { ConfigError, type FailurePolicy, internal, type LimitSpec } from '@tiered-limiter/core';
import { DEFAULT_FLEET_CALLS_PER_SECOND } from '../defaults.js';

const { assertInteger, assertKnownOptions, assertObject, assertOneOf } = internal;

/** The periodic sync of `TieredLimiter` (see `Syncer`). */
export interface SyncOptions {
  /**
   * Store calls a second the whole fleet may make, its syncs and the calls between them together.
   * Each instance syncs every `instances × calls ÷ (0.9 × fleetCallsPerSecond)` seconds (20 ms to
   * 5 s), `calls` being what one of its syncs costs (a call per 32 keys it weighs: those it holds
   * tokens for or that asked the store since the last sync), leaving a tenth of the budget to
   * refills for keys that ran dry between syncs; a lease lives one period plus a little (a quiet
   * key's, far below its limit, two, and the sync between sends it nothing). A larger fleet, or
   * one holding more keys, syncs less often, so Redis sees at most about this many calls whatever
   * the fleet's size and request rate.
   * @default 200
   */
  fleetCallsPerSecond?: number;
}

/** How a two-tier limiter decides for a key it has no state for. */
export interface ColdStartOptions {
  /**
   * `exact` asks the store (one key-op, coalesced). `optimistic` admits up to `credit` tokens at
   * once, in process, and charges them to the key at the end of the event loop's turn, with the
   * turn's other charges (the bucket may go into debt): a cold key costs no wait, and the fleet's
   * bound grows by `N·credit·(1 + ⌊W / spacingMs⌋)`, `N` the declared `instances`. With the
   * periodic sync, credit is given only once the fleet registry's live count, from this instance's
   * answered heartbeats, has been within `N` for a spacing, unbroken (a fleet scaled past it goes
   * the exact way until it is back; an instance that replaced another waits a spacing); without
   * it, from a spacing after the limiter was made. While 128 charges wait to be answered, a new key
   * goes the exact way, so that a burst of new keys cannot queue charges ahead of requests.
   * @default 'exact'
   */
  mode: 'exact' | 'optimistic';
  /** Tokens an instance may admit for a key before the store has heard of it. @default 1 */
  credit?: number;
  /**
   * Milliseconds before the same key may start optimistically again on this instance.
   * @default the smallest the rule allows: max(lease lifetime, N·credit ÷ rate)
   */
  spacingMs?: number;
}

/** Shortest sync period: below it the timer and the ops would cost more than the leases save. */
export const MIN_SYNC_PERIOD_MS = 20;
/** Longest sync period: leases never live much longer than a few seconds. */
export const MAX_SYNC_PERIOD_MS = 5_000;
/**
 * Share of the fleet's call budget its syncs take. The rest is for out-of-band calls, a refill
 * for a key that ran dry between syncs: at 200 instances on 10 hot keys they were 16 calls a
 * second, and syncs that took the whole budget put the fleet at 215 calls a second against 200.
 */
export const SYNC_SHARE = 0.9;

/**
 * Ops a store call carries: `RedisStore` gathers a sync's ops into calls of 32 keys (its default
 * `coalesce.maxKeysPerCall`), so a sync of more keys costs more calls.
 */
export const OPS_PER_CALL = 32;

/**
 * The sync period, in ms, of a fleet of `instances` with `budget` calls a second, whose syncs
 * cost `calls` calls each.
 */
export function syncPeriodMs(instances: number, budget: number, calls = 1): number {
  const period = Math.round(((instances * calls) / (budget * SYNC_SHARE)) * 1000);
  return Math.min(MAX_SYNC_PERIOD_MS, Math.max(MIN_SYNC_PERIOD_MS, period));
}

/** `SyncOptions`, checked; `undefined` when the sync is off. */
export interface SyncConfig {
  readonly budget: number;
}

/** `ColdStartOptions` in optimistic mode, checked; `undefined` for exact. */
export interface ColdStartConfig {
  readonly credit: number;
  /** The spacing in force: the one given, or the smallest the rule allows for the limits in force. */
  readonly spacingMs: number;
  /** What the rule is weighed against again when the limits change (`coldStartUnder`). */
  readonly rule: {
    readonly instances: number;
    readonly leaseMs: number;
    /** `coldStart.spacingMs` as given, or `undefined` for the default. */
    readonly givenSpacingMs: number | undefined;
  };
}

/** Checks `sync` (`false` turns the periodic sync off). */
export function resolveSync(sync: unknown): SyncConfig | undefined {
  if (sync === false) return undefined;
  const o = sync === undefined ? {} : assertObject<SyncOptions>('sync', sync);
  assertKnownOptions('sync', o, ['fleetCallsPerSecond']);
  return {
    budget: assertInteger(
      'sync.fleetCallsPerSecond',
      o.fleetCallsPerSecond ?? DEFAULT_FLEET_CALLS_PER_SECOND,
      1,
      1_000_000,
    ),
  };
}

/**
 * Checks `coldStart`. Optimistic mode is refused, naming the rule, unless it keeps the fleet near
 * its limit: `N·credit ≤ 0.1·capacity` and `spacingMs ≥ max(leaseMs, N·credit ÷ rate)` for every
 * limit, with `N` the declared `instances` (required); never with the `closed` policy.
 */
export function resolveColdStart(
  coldStart: unknown,
  limits: readonly LimitSpec[],
  instances: number | undefined,
  leaseMs: number,
  policy: FailurePolicy,
): ColdStartConfig | undefined {
  if (coldStart === undefined) return undefined;
  const o = assertObject<ColdStartOptions>('coldStart', coldStart);
  assertKnownOptions('coldStart', o, ['mode', 'credit', 'spacingMs']);
  if (assertOneOf('coldStart.mode', o.mode, ['exact', 'optimistic'] as const) === 'exact') return undefined;
  if (policy === 'closed') {
    throw new ConfigError(
      'coldStart.mode',
      o.mode,
      "'exact' with failurePolicy 'closed': a hard cap admits nothing unasked",
    );
  }
  if (instances === undefined) {
    throw new ConfigError(
      'instances',
      instances,
      'the fleet size, for coldStart optimistic (its bound is N·credit)',
    );
  }
  const credit = assertInteger('coldStart.credit', o.credit ?? 1, 1, 1_000_000);
  // A spacing of the wrong kind is named as such before the rule is weighed.
  const givenSpacingMs =
    o.spacingMs === undefined ? undefined : assertInteger('coldStart.spacingMs', o.spacingMs, 1, 86_400_000);
  return coldStartUnder({ credit, spacingMs: 0, rule: { instances, leaseMs, givenSpacingMs } }, limits);
}

/**
 * `config` weighed against `limits` (at construction, and again by `setLimits`): refused, naming
 * the option and the limit, unless `N·credit ≤ 0.1·capacity` and the spacing is at least
 * `max(leaseMs, N·credit ÷ rate)` for every limit; a default spacing becomes that floor. Weighed
 * at construction alone, new limits with a tenth of the capacity or of the rate kept the credit and
 * the spacing made for the old ones: credit 10 given on a capacity of 20, every 1 s where the
 * rule asks 10 s.
 */
export function coldStartUnder(config: ColdStartConfig, limits: readonly LimitSpec[]): ColdStartConfig {
  const { credit, rule } = config;
  const { instances } = rule;
  let spacingFloor = rule.leaseMs;
  for (const spec of limits) {
    if (instances * credit > 0.1 * spec.capacity) {
      throw new ConfigError(
        'coldStart.credit',
        credit,
        `at most 0.1 × capacity ÷ instances (${spec.name}: 0.1 × ${spec.capacity} ÷ ${instances})`,
      );
    }
    // From the rate a second: `refillPerMs` is rounded (9/s is 0.009000000000000001 a ms), and
    // 9 ÷ 0.009… came to 1,001 ms where the rule says 1,000, refusing a spacing of exactly N·c ÷ r.
    spacingFloor = Math.max(spacingFloor, Math.ceil((instances * credit * 1000) / spec.refillPerSecond));
  }
  const spacingMs = rule.givenSpacingMs ?? spacingFloor;
  if (spacingMs < spacingFloor) {
    throw new ConfigError(
      'coldStart.spacingMs',
      spacingMs,
      `at least max(lease lifetime, N·credit ÷ rate) = ${spacingFloor} ms`,
    );
  }
  return { credit, spacingMs, rule };
}
