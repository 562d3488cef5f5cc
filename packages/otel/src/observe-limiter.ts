import type { Attributes, BatchObservableResult, Meter, Observable } from '@opentelemetry/api';
import { ConfigError, type LimiterStats, type StoreError } from '@tiered-limiter/core';
import { assertAttributes, assertMeter, assertOptions } from './checks.js';
import { ATTRIBUTES, METRICS } from './names.js';

/** The `Meter` methods `observeLimiter` calls. */
const METER_METHODS = [
  'createObservableCounter',
  'createObservableGauge',
  'createObservableUpDownCounter',
  'addBatchObservableCallback',
  'removeBatchObservableCallback',
] as const;

/**
 * What `observeLimiter` reads of a limiter's `stats()`: core's counters, and whichever of the
 * richer ones the limiter keeps (`TieredLimiter` and `RequestLimiter` keep most of them). A
 * counter the limiter does not keep is not reported.
 */
export interface ObservedStats extends LimiterStats {
  /** Decisions by the tier that made them. */
  readonly decisions?: Readonly<Record<string, number>>;
  /** Operations sent to the store (`TieredLimiter`, `RequestLimiter`). */
  readonly storeOps?: number;
  /** Tokens granted by the shared bucket as leases. */
  readonly tokensLeased?: number;
  /** Tokens a sparse key's take took (`TieredLimiter`: no lease kept). */
  readonly tokensTaken?: number;
  /** Tokens admitted by optimistic cold start before the store heard of their key. */
  readonly tokensOptimistic?: number;
  /** Unspent tokens handed back. */
  readonly tokensRefunded?: number;
  /** Tokens whose lease expired before they were spent. */
  readonly tokensExpired?: number;
  /** Tokens reported in calls that failed. */
  readonly tokensUnreported?: number;
  /** Tokens held in leases now. */
  readonly tokensHeld?: number;
  /** Milliseconds spent degraded. */
  readonly fallbackMs?: number;
  /** Whether the store is considered down now. */
  readonly degraded?: boolean;
  /**
   * Instances alive as the store counts them (`TieredLimiter`); where `stats()` has this key, the
   * fleet gauge reads it alone, since `instances` there is a floor of the declared size.
   */
  readonly liveInstances?: number | undefined;
  /** Live instances of the fleet (a number, or an object with `live`), where `liveInstances` is not kept. */
  readonly instances?:
    | number
    | {
        /** Instances seen alive in the last period. */
        readonly live?: number;
      };
}

/** A limiter as `observeLimiter` sees it: `stats()`, and its events where it has them. */
export interface ObservableLimiter {
  /** The limiter's counters. */
  stats(): ObservedStats;
  /** Whether the store is considered down, where `stats()` does not say (`RequestLimiter`). */
  readonly degraded?: boolean;
  /** Subscribes to an event (`degraded`); limiters of `@tiered-limiter/local` are EventEmitters. */
  on?(event: 'degraded', listener: (error: StoreError) => void): unknown;
  /** Unsubscribes. */
  off?(event: 'degraded', listener: (error: StoreError) => void): unknown;
}

/** Options of `observeLimiter`. */
export interface ObserveLimiterOptions {
  /**
   * Attributes added to every data point, to tell limiters apart (e.g.
   * `{ 'tiered_limiter.name': 'api' }`).
   * @default {}
   */
  attributes?: Attributes;
}

/** What `observeLimiter` returns: a handle to stop reporting. */
export interface LimiterObservation {
  /** Stops reporting: removes the meter callback and the event listener. */
  stop(): void;
}

/**
 * Reports a limiter's counters through an OpenTelemetry `Meter`: decisions by outcome and by tier,
 * store round trips, tokens leased, refunded, expired and unreported, tokens held, time spent
 * degraded, whether it is degraded, breaker openings, and the live fleet size where the limiter
 * counts it (names in `METRICS`). The counters are read from `stats()` when the SDK collects, so
 * the hot path pays nothing. For a latency histogram of store calls, wrap the store with
 * `instrumentStore`. Needs only `@opentelemetry/api`'s types: pass the meter of your SDK.
 *
 * @example
 * import { metrics } from '@opentelemetry/api';
 * import { observeLimiter } from '@tiered-limiter/otel';
 *
 * const observation = observeLimiter(limiter, metrics.getMeter('my-service'), {
 *   attributes: { 'tiered_limiter.name': 'api' },
 * });
 * // … on shutdown:
 * observation.stop();
 */
export function observeLimiter(
  limiter: ObservableLimiter,
  meter: Meter,
  options: ObserveLimiterOptions = {},
): LimiterObservation {
  assertObservable(limiter);
  assertMeter(meter, METER_METHODS);
  const base = assertAttributes(assertOptions<ObserveLimiterOptions>(options, ['attributes']).attributes);
  const counter = (name: string, description: string, unit: string) =>
    meter.createObservableCounter(name, { description, unit });
  const gauge = (name: string, description: string, unit: string) =>
    meter.createObservableGauge(name, { description, unit });
  const decisions = counter(METRICS.decisions, 'Decisions by outcome', '{decision}');
  const byTier = counter(METRICS.decisionsByTier, 'Decisions by the tier that made them', '{decision}');
  const storeOps = counter(
    METRICS.storeOperations,
    'Operations sent to the shared store (many may share one call)',
    '{operation}',
  );
  const tokens = counter(METRICS.tokens, 'Tokens by what became of them', '{token}');
  const degradedTime = counter(METRICS.degradedTime, 'Time spent with the store considered down', 's');
  const held = meter.createObservableUpDownCounter(METRICS.tokensHeld, {
    description: 'Tokens held in leases now',
    unit: '{token}',
  });
  const degraded = gauge(METRICS.degraded, '1 while the store is considered down', '1');
  const instances = gauge(METRICS.instances, 'Live instances of the fleet sharing the limit', '{instance}');
  const degradations = counter(METRICS.degradations, 'Times the store was considered down', '{event}');
  const observables: Observable[] = [
    decisions,
    byTier,
    storeOps,
    tokens,
    held,
    degradedTime,
    degraded,
    instances,
    degradations,
  ];
  const tally = limiter.on === undefined ? undefined : openings.watch(limiter);
  const callback = (result: BatchObservableResult) => {
    const stats = limiter.stats();
    result.observe(decisions, stats.allowed, { ...base, [ATTRIBUTES.outcome]: 'allowed' });
    result.observe(decisions, stats.denied, { ...base, [ATTRIBUTES.outcome]: 'denied' });
    for (const [tier, count] of Object.entries(stats.decisions ?? {})) {
      result.observe(byTier, count, { ...base, [ATTRIBUTES.tier]: tier });
    }
    if (stats.storeOps !== undefined) result.observe(storeOps, stats.storeOps, base);
    const states = {
      leased: stats.tokensLeased,
      taken: stats.tokensTaken,
      optimistic: stats.tokensOptimistic,
      refunded: stats.tokensRefunded,
      expired: stats.tokensExpired,
      unreported: stats.tokensUnreported,
    };
    for (const [state, count] of Object.entries(states)) {
      if (count !== undefined) result.observe(tokens, count, { ...base, [ATTRIBUTES.tokenState]: state });
    }
    if (stats.tokensHeld !== undefined) result.observe(held, stats.tokensHeld, base);
    if (stats.fallbackMs !== undefined) result.observe(degradedTime, stats.fallbackMs / 1000, base);
    const down = stats.degraded ?? limiter.degraded;
    if (down !== undefined) result.observe(degraded, down ? 1 : 0, base);
    // A TieredLimiter's `instances` never reads below the declared size (and is the declared size
    // alone without the sync): as the gauge of live instances it said 4 with one instance alive.
    const live =
      'liveInstances' in stats
        ? stats.liveInstances
        : typeof stats.instances === 'number'
          ? stats.instances
          : stats.instances?.live;
    if (live !== undefined) result.observe(instances, live, base);
    if (tally !== undefined) result.observe(degradations, tally.count, base);
  };
  meter.addBatchObservableCallback(callback, observables);
  let stopped = false;
  return {
    stop() {
      if (stopped) return;
      stopped = true;
      meter.removeBatchObservableCallback(callback, observables);
      if (tally !== undefined) openings.release(limiter);
    },
  };
}

/** A limiter's breaker openings, counted once however many observations read them. */
interface Tally {
  count: number;
  users: number;
  readonly listener: () => void;
}

/**
 * The `degraded` events of each observed limiter, one listener a limiter: each observation used to
 * add 1 an event to a counter of its own, and two observations of one limiter on one meter (the
 * same series) read 2 for one opening, where every counter read from `stats()` reads once. The
 * listener goes when the last observation stops; the count stays with the limiter, held weakly.
 */
const openings = {
  tallies: new WeakMap<ObservableLimiter, Tally>(),
  watch(limiter: ObservableLimiter): Tally {
    let tally = this.tallies.get(limiter);
    if (tally === undefined) {
      const created: Tally = { count: 0, users: 0, listener: () => created.count++ };
      this.tallies.set(limiter, created);
      tally = created;
    }
    if (tally.users++ === 0) limiter.on?.('degraded', tally.listener);
    return tally;
  },
  release(limiter: ObservableLimiter): void {
    const tally = this.tallies.get(limiter);
    if (tally !== undefined && --tally.users === 0) limiter.off?.('degraded', tally.listener);
  },
};

/**
 * Checks that `limiter` can be observed: a `stats()` that reports `allowed` and `denied`, and
 * `on`/`off` as functions where it has them. Without this, a wrong object was accepted and every
 * collection threw inside the SDK, which only logs it: the metrics were silently absent.
 */
function assertObservable(limiter: unknown): asserts limiter is ObservableLimiter {
  const l = limiter as Record<string, unknown> | null;
  const expected = 'a limiter (an object with stats(), as every tiered-limiter limiter has)';
  if (l === null || typeof l !== 'object' || typeof l.stats !== 'function') {
    throw new ConfigError('limiter', limiter, expected);
  }
  for (const method of ['on', 'off'] as const) {
    if (l[method] !== undefined && typeof l[method] !== 'function') {
      throw new ConfigError(`limiter.${method}`, l[method], 'a function, or absent');
    }
  }
  const stats = (l as unknown as ObservableLimiter).stats() as Partial<LimiterStats> | null;
  if (
    stats === null ||
    typeof stats !== 'object' ||
    typeof stats.allowed !== 'number' ||
    typeof stats.denied !== 'number'
  ) {
    throw new ConfigError('limiter', limiter, `${expected}; its stats() gave no allowed and denied counts`);
  }
}
