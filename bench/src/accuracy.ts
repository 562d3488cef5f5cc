import {
  commandDelta,
  type FleetOrders,
  type FleetReport,
  optimisticBound,
  runFleet,
  syncPeriodOf,
  tokenBucketBound,
} from '@tiered-limiter/test-harness';
import { type Accounted, columns, decisionWords } from './columns.js';
import { count, percent, small } from './format.js';
import { loopCell, POLICY_NOTE, watchHealth } from './health.js';
import { BITES_200, peerLimitOf } from './limits.js';
import type { BenchSettings, Column, RunContext, Section } from './section.js';
import { secondCell, type WindowReport, windowCell, windowReport, worstOf } from './windows.js';

/** The shared limit the fleet saturates: the README's example, capacity 100 and 200 per second. */
const LIMIT = BITES_200.spec;
/** The on-demand row's lease lifetime (`sync: false`). */
export const LEASE_TTL_MS = 1000;
/** A stamp is `Date.now()` just after a decision: on a busy machine it may trail it by a few ms. */
const STAMP_SLACK_MS = 20;
/** Optimistic cold start in these rows: a token per process, a key at most once a second per process. */
const CREDIT = 1;
const SPACING_MS = 1000;
/** Keys beside the hot one in the many-keys rows. */
const OTHER_KEYS = 50;

type AccuracyTier = FleetOrders['tier'];
/** How a two-tier row is set up: exact (the default sync), optimistic, or refills on demand. */
type Mode = 'exact' | 'optimistic' | 'on-demand';
export interface AccuracyTask {
  readonly name: string;
  readonly tier: AccuracyTier;
  readonly limiter: string;
  readonly mode: Mode;
  /** Keys beside the hot one (0: the hot key alone). */
  readonly otherKeys: number;
  readonly processes: number;
}

/** `health` is this process's (and the probe's); the workers' loop delay is `workerLoopDelay`. */
export interface AccuracyRow extends Accounted {
  readonly name: string;
  readonly limiter: string;
  readonly processes: number;
  readonly keys: number;
  readonly durationMs: number;
  readonly decisions: number;
  /** The worst p99 and max event-loop delay among the workers, ms. */
  readonly workerLoopDelay: { readonly loopDelayP99Ms: number; readonly loopDelayMaxMs: number };
  /** Admitted on the hot key (every key in a one-key row). */
  readonly hotAllowed: number;
  /** What the limit should admit on the hot key in the run: the token bucket's, or for rate-limiter-flexible its windows'. */
  readonly ideal: number;
  readonly idealRule: string;
  readonly allowedOfIdeal: number;
  /** Script calls Redis ran during the run (`INFO commandstats`). */
  readonly roundTrips: number;
  readonly roundTripsPer1000: number;
  /** The bound checked, in words (`null` for rate-limiter-flexible). */
  readonly boundRule: string | null;
  /** The worst window over every key against the bound of the mode in use. */
  readonly window: WindowReport | null;
}

const TIERS: readonly [AccuracyTier, string, Mode, number][] = [
  ['request', 'RequestLimiter', 'exact', 0],
  ['tiered', 'TieredLimiter', 'exact', 0],
  ['tiered', 'TieredLimiter (optimistic)', 'optimistic', 0],
  ['tiered', 'TieredLimiter (sync: false)', 'on-demand', 0],
  ['tiered', 'TieredLimiter', 'exact', OTHER_KEYS],
  ['tiered', 'TieredLimiter (optimistic)', 'optimistic', OTHER_KEYS],
  ['rlf', 'RateLimiterRedis', 'exact', 0],
];

/** Optimistic rows only where the rule admits them: N·credit ≤ 0.1 × capacity. */
export function accuracyTasks(processes: number): AccuracyTask[] {
  const optimisticAllowed = processes * CREDIT <= 0.1 * LIMIT.capacity;
  return TIERS.filter(([, , mode]) => mode !== 'optimistic' || optimisticAllowed).map(
    ([tier, limiter, mode, otherKeys]) => ({
      name: `${limiter} · ${otherKeys === 0 ? '1 hot key' : `hot key + ${otherKeys} keys`}, ${processes} processes`,
      tier,
      limiter,
      mode,
      otherKeys,
      processes,
    }),
  );
}

/** The limiter options of a mode, for the fleet worker. */
function modeOrders(mode: Mode): Pick<FleetOrders, 'lease' | 'options' | 'failurePolicy'> {
  if (mode === 'on-demand') return { lease: { ttlMs: LEASE_TTL_MS }, failurePolicy: 'closed' };
  if (mode === 'optimistic') {
    // A hard cap (`closed`) admits nothing unasked: optimistic cold start needs another policy.
    return {
      failurePolicy: 'open',
      options: { coldStart: { mode: 'optimistic', credit: CREDIT, spacingMs: SPACING_MS } },
    };
  }
  return { failurePolicy: 'closed' };
}

/**
 * The bound of a row's mode, and its words: `T` is the longest sync period the row's limiters
 * reported (what a lease may borrow; 0 with leases on demand).
 */
function boundOf(
  task: AccuracyTask,
  periodMs: number,
): {
  bound: ReturnType<typeof tokenBucketBound>;
  rule: string;
  pieceMs?: number;
} {
  const { capacity, refillPerSecond } = LIMIT;
  const borrowed = periodMs > 0 ? ` + r·${periodMs} ms` : '';
  if (task.mode === 'optimistic') {
    const terms = { instances: task.processes, credit: CREDIT, spacingMs: SPACING_MS };
    return {
      bound: optimisticBound(capacity, refillPerSecond, terms, periodMs + STAMP_SLACK_MS),
      rule: `C + r·W${borrowed} + N·c·(1 + ⌊W / ${SPACING_MS} ms⌋), N·c = ${task.processes * CREDIT}`,
      pieceMs: SPACING_MS,
    };
  }
  return {
    bound: tokenBucketBound(capacity, refillPerSecond, periodMs + STAMP_SLACK_MS),
    rule: `C + r·W${borrowed}`,
  };
}

/** N processes, each with its own connection and limiter, hammer the keys; Redis counts the commands. */
export async function measureAccuracy(task: AccuracyTask, context: RunContext): Promise<AccuracyRow> {
  const { target, settings } = context;
  if (target === undefined) throw new Error('accuracy rows need Redis');
  const durationMs = settings.accuracyMs;
  const peer = peerLimitOf(LIMIT);
  const manyKeys = task.otherKeys > 0;
  const orders: FleetOrders = {
    url: target.url,
    prefix: context.prefix,
    tier: task.tier,
    capacity: LIMIT.capacity,
    refillPerSecond: LIMIT.refillPerSecond,
    peer,
    instances: task.processes,
    durationMs,
    maxDecisions: 1_000_000_000,
    // The hot key (`key:0`) gets half the decisions, the others the rest in turn.
    ...(manyKeys ? { key: 'key', keys: task.otherKeys + 1, hotShare: 0.5 } : {}),
    ...modeOrders(task.mode),
  };
  const before = await target.commandStats();
  const watch = watchHealth(target.probe);
  // An optimistic fleet runs idle for a spacing first: credit starts a spacing into a limiter's life,
  // and a service's traffic meets limiters that have been running.
  const idleBeforeMs = task.mode === 'optimistic' ? SPACING_MS + 200 : 0;
  const reports = await runFleet(
    Array.from({ length: task.processes }, () => orders),
    { idleBeforeMs },
  );
  const health = await watch.stop();
  const redis = commandDelta(before, await target.commandStats());

  const sum = (pick: (r: FleetReport) => number) => reports.reduce((s, r) => s + pick(r), 0);
  const byKey: number[][] = manyKeys
    ? Array.from({ length: task.otherKeys + 1 }, (_, k) => reports.flatMap((r) => r.admittedAtByKey![k]!))
    : [reports.flatMap((r) => r.admittedAt)];
  const hot = byKey[0]!;
  const decisions = sum((r) => r.decisions);
  let ideal: number;
  let idealRule: string;
  if (task.tier === 'rlf') {
    const windows = Math.ceil(durationMs / (peer.durationS * 1000));
    ideal = peer.points * windows;
    idealRule = `${peer.points} per ${peer.durationS} s window × ${windows} window${windows === 1 ? '' : 's'}`;
  } else {
    // One token bucket over the hot key's traffic: full at its first request (the store makes the
    // bucket full then; the first admission is stamped a round trip later), refilled until the
    // fleet's last request. Refill outside the traffic has nothing to admit: before the first
    // request, and after the last, while workers only await answers.
    const spanMs = Math.max(...reports.map((r) => r.lastRequestAt)) - Math.min(...hot);
    ideal = LIMIT.capacity + (LIMIT.refillPerSecond * spanMs) / 1000;
    idealRule = `capacity ${LIMIT.capacity} + ${LIMIT.refillPerSecond}/s × ${(spanMs / 1000).toFixed(2)} s`;
  }
  const checked = task.tier === 'rlf' ? null : boundOf(task, syncPeriodOf(reports));
  return {
    name: task.name,
    limiter: task.limiter,
    processes: task.processes,
    keys: byKey.length,
    durationMs,
    decisions,
    allowed: sum((r) => r.admittedAt.length),
    denied: sum((r) => r.denied),
    policy:
      task.tier === 'rlf'
        ? null
        : { allowed: sum((r) => r.fallback.allowed), denied: sum((r) => r.fallback.denied) },
    health,
    workerLoopDelay: {
      loopDelayP99Ms: Math.max(...reports.map((r) => r.loopDelayMs.p99)),
      loopDelayMaxMs: Math.max(...reports.map((r) => r.loopDelayMs.max)),
    },
    hotAllowed: hot.length,
    ideal,
    idealRule,
    allowedOfIdeal: hot.length / ideal,
    roundTrips: redis.roundTrips,
    roundTripsPer1000: decisions === 0 ? 0 : (1000 * redis.roundTrips) / decisions,
    boundRule: checked?.rule ?? null,
    window:
      checked === null
        ? null
        : worstOf(
            byKey.map((stamps, k) =>
              windowReport(stamps, checked.bound, manyKeys ? `key:${k}` : null, checked.pieceMs),
            ),
          ),
  };
}

const COLUMNS: readonly Column<AccuracyRow>[] = [
  { title: 'decisions', cell: (r) => count(r.decisions) },
  ...columns.decisions<AccuracyRow>(),
  { title: 'hot key allowed', cell: (r) => count(r.hotAllowed) },
  { title: 'ideal', cell: (r) => count(r.ideal) },
  { title: 'hot / ideal', cell: (r) => percent(r.allowedOfIdeal) },
  columns.roundTrips<AccuracyRow>(),
  { title: 'bound', cell: (r) => r.boundRule ?? '—' },
  { title: 'worst window', cell: (r) => windowCell(r.window) },
  { title: 'most in 1 s', cell: (r) => secondCell(r.window) },
  columns.loop<AccuracyRow>('loop p99 / max (workers)', (r) => r.workerLoopDelay),
  columns.probe<AccuracyRow>(),
];

export const accuracySection: Section<AccuracyTask, AccuracyRow> = {
  id: 'accuracy',
  title: 'Accuracy: processes sharing keys at capacity 100, 200 per second, against the bound of each mode',
  usesRedis: true,
  tasks: (s) => accuracyTasks(s.processes),
  measure: measureAccuracy,
  progress: (row) =>
    `${row.name}: ${decisionWords(row)}, ideal ${count(row.ideal)}, ` +
    `${small(row.roundTripsPer1000)} Redis RT per 1,000, ` +
    `workers' loop ${loopCell(row.workerLoopDelay)}`,
  columns: COLUMNS,
  notes: (s: BenchSettings) => [
    'Each process (the harness fleet worker, `runFleet`) has its own connection and limiter, from the built ' +
      `packages, and hammers its keys (one decision at a time, yielding every 128) for ${count(s.accuracyMs)} ms, ` +
      'all starting together. The limit: capacity 100, 200 per second on every key, `instances` = the process ' +
      'count, the default 20 ms store timeout. `1 hot key`: every decision on one key; `hot key + 50 keys`: half ' +
      'the decisions on the hot key, the other half on 50 keys in turn (each of them at its limit too).',
    '**Modes**: `TieredLimiter` is the default (the periodic sync, exact cold start, `failurePolicy: closed`); ' +
      `\`(optimistic)\` adds \`coldStart: { mode: 'optimistic', credit: ${CREDIT}, spacingMs: ${SPACING_MS} }\` ` +
      '(with `failurePolicy: open`: a hard cap admits nothing unasked; its fleet runs idle for a spacing before the ' +
      'traffic, since an instance gives credit only a spacing into its life); `(sync: false)` refills leases on demand, ' +
      `\`lease.ttlMs\` ${count(LEASE_TTL_MS)}. Optimistic rows run only when the rule allows them (N·credit ≤ 0.1 × capacity).`,
    '**allowed** counts what the limit admitted, over every key; a decision of the failure policy is never counted ' +
      "as admitted. **Ideal** (of the hot key): capacity + rate × the time from its first admission to the fleet's last " +
      'request (the bucket is made full at the first request; refill before it, or after the last request while ' +
      'workers await their answers, has nothing to admit). rate-limiter-flexible has no token ' +
      'bucket: its nearest limit is 200 points per 1 s fixed window, whose ideal is 200 per window begun in the run.',
    '**Worst window**: over every key, the window between two admissions that came closest to the bound of the ' +
      'mode in use (`worstWindow` of the harness; ✗ marks a breach): `C + r·W` (what one token bucket admits) for ' +
      'leases on demand and the per-request tier, `C + r·(W + T)` with the periodic sync (`T` the sync period the ' +
      'limiters reported: what a lease may borrow), plus `N·credit·(1 + ⌊W / spacingMs⌋)` with ' +
      "optimistic cold start. Admissions are stamped with `Date.now()` in each process; each window's bound allows " +
      `${STAMP_SLACK_MS} ms more refill for the stamps' lag.`,
    POLICY_NOTE,
  ],
};
