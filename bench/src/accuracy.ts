import {
  commandDelta,
  type FleetOrders,
  mostInWindow,
  runFleet,
  tokenBucketBound,
  worstWindow,
} from '@tiered-limiter/test-harness';
import { type Accounted, columns, decisionWords } from './columns.js';
import { count, percent, small } from './format.js';
import { loopCell, POLICY_NOTE, watchHealth } from './health.js';
import { BITES_200, peerLimitOf } from './limits.js';
import type { BenchSettings, Column, RunContext, Section } from './section.js';

/** The shared limit the fleet saturates: the README's example, capacity 100 and 200 per second. */
const LIMIT = BITES_200.spec;
export const LEASE_TTL_MS = 1000;
/** A stamp is `Date.now()` just after a decision: on a busy machine it may trail it by a few ms. */
const STAMP_SLACK_MS = 20;

type AccuracyTier = FleetOrders['tier'];
export interface AccuracyTask {
  readonly name: string;
  readonly tier: AccuracyTier;
  readonly limiter: string;
  readonly processes: number;
}

/** The busiest window of a run against the bound of its mode; `null` for rate-limiter-flexible. */
export interface WindowReport {
  /** Admitted in the window that came closest to (or went furthest over) the bound. */
  readonly admitted: number;
  readonly windowMs: number;
  readonly bound: number;
  /** `admitted − bound`: ≤ 0 means the bound held in every window. */
  readonly excess: number;
  /** The most admitted in any 1 s window, and the bound for 1 s. */
  readonly maxIn1s: number;
  readonly boundFor1s: number;
}

/** `health` is this process's (and the probe's); the workers' loop delay is `workerLoopDelay`. */
export interface AccuracyRow extends Accounted {
  readonly name: string;
  readonly limiter: string;
  readonly processes: number;
  readonly durationMs: number;
  readonly decisions: number;
  /** The worst p99 and max event-loop delay among the workers, ms. */
  readonly workerLoopDelay: { readonly loopDelayP99Ms: number; readonly loopDelayMaxMs: number };
  /** What the limit should admit in the run: the token bucket's, or for rate-limiter-flexible its windows'. */
  readonly ideal: number;
  readonly idealRule: string;
  readonly allowedOfIdeal: number;
  /** Script calls Redis ran during the run (`INFO commandstats`). */
  readonly roundTrips: number;
  readonly roundTripsPer1000: number;
  /** TieredLimiter: against the README bound; RequestLimiter: against the global bucket alone. */
  readonly window: WindowReport | null;
}

const TIERS: readonly [AccuracyTier, string][] = [
  ['request', 'RequestLimiter'],
  ['tiered', 'TieredLimiter'],
  ['rlf', 'RateLimiterRedis'],
];

export function accuracyTasks(processes: number): AccuracyTask[] {
  return TIERS.map(([tier, limiter]) => ({
    name: `${limiter} · accuracy, ${processes} processes`,
    tier,
    limiter,
    processes,
  }));
}

/** N processes, each with its own connection and limiter, hammer one key; Redis counts the commands. */
export async function measureAccuracy(task: AccuracyTask, context: RunContext): Promise<AccuracyRow> {
  const { target, settings } = context;
  if (target === undefined) throw new Error('accuracy rows need Redis');
  const durationMs = settings.accuracyMs;
  const peer = peerLimitOf(LIMIT);
  const orders: FleetOrders = {
    url: target.url,
    prefix: context.prefix,
    tier: task.tier,
    capacity: LIMIT.capacity,
    refillPerSecond: LIMIT.refillPerSecond,
    peer,
    failurePolicy: 'closed',
    instances: task.processes,
    lease: { ttlMs: LEASE_TTL_MS },
    durationMs,
    maxDecisions: 1_000_000_000,
  };
  const before = await target.commandStats();
  const watch = watchHealth(target.probe);
  const reports = await runFleet(Array.from({ length: task.processes }, () => orders));
  const health = await watch.stop();
  const redis = commandDelta(before, await target.commandStats());

  const sum = (pick: (r: (typeof reports)[number]) => number) => reports.reduce((s, r) => s + pick(r), 0);
  const stamps = reports.flatMap((r) => r.admittedAt);
  const decisions = sum((r) => r.decisions);
  let ideal: number;
  let idealRule: string;
  if (task.tier === 'rlf') {
    const windows = Math.ceil(durationMs / (peer.durationS * 1000));
    ideal = peer.points * windows;
    idealRule = `${peer.points} per ${peer.durationS} s window × ${windows} window${windows === 1 ? '' : 's'}`;
  } else {
    ideal = LIMIT.capacity + (LIMIT.refillPerSecond * durationMs) / 1000;
    idealRule = `capacity ${LIMIT.capacity} + ${LIMIT.refillPerSecond}/s × ${durationMs / 1000} s`;
  }
  return {
    name: task.name,
    limiter: task.limiter,
    processes: task.processes,
    durationMs,
    decisions,
    allowed: stamps.length,
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
    ideal,
    idealRule,
    allowedOfIdeal: stamps.length / ideal,
    roundTrips: redis.roundTrips,
    roundTripsPer1000: decisions === 0 ? 0 : (1000 * redis.roundTrips) / decisions,
    window: task.tier === 'rlf' ? null : checkWindows(stamps, task.tier === 'tiered' ? LEASE_TTL_MS : 0),
  };
}

/** The busiest window against `capacity + rate × (W + extraMs)`, widened by the stamps' lag. */
function checkWindows(stamps: readonly number[], extraMs: number): WindowReport {
  const bound = tokenBucketBound(LIMIT.capacity, LIMIT.refillPerSecond, extraMs + STAMP_SLACK_MS);
  const worst = worstWindow(stamps, bound);
  return {
    admitted: worst.admitted,
    windowMs: worst.windowMs,
    bound: worst.bound,
    excess: worst.excess,
    maxIn1s: mostInWindow(stamps, 1000).admitted,
    boundFor1s: bound(1000),
  };
}

function windowCells(row: AccuracyRow): [string, string] {
  const w = row.window;
  if (w === null) return ['—', '—'];
  return [
    `${count(w.admitted)} in ${count(w.windowMs)} ms (bound ${count(Math.floor(w.bound))})${w.excess > 0 ? ' ✗' : ''}`,
    `${count(w.maxIn1s)} (bound ${count(Math.floor(w.boundFor1s))})`,
  ];
}

const COLUMNS: readonly Column<AccuracyRow>[] = [
  { title: 'decisions', cell: (r) => count(r.decisions) },
  ...columns.decisions<AccuracyRow>(),
  { title: 'ideal', cell: (r) => count(r.ideal) },
  { title: 'allowed / ideal', cell: (r) => percent(r.allowedOfIdeal) },
  columns.roundTrips<AccuracyRow>(),
  { title: 'busiest window', cell: (r) => windowCells(r)[0] },
  { title: 'most in 1 s', cell: (r) => windowCells(r)[1] },
  columns.loop<AccuracyRow>('loop p99 / max (workers)', (r) => r.workerLoopDelay),
  columns.probe<AccuracyRow>(),
];

export const accuracySection: Section<AccuracyTask, AccuracyRow> = {
  id: 'accuracy',
  title: 'Accuracy: processes sharing one key at capacity 100, 200 per second',
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
      `packages, and hammers one key (one decision at a time, yielding every 128) for ${count(s.accuracyMs)} ms, ` +
      'all starting together. The limit: capacity 100, 200 per second, `failurePolicy: closed`, `instances` = the ' +
      'process count, lease TTL 1,000 ms.',
    '**allowed** counts what the limit admitted; a decision of the failure policy is never counted as admitted. ' +
      '**Ideal** for the token bucket: capacity + rate × duration. rate-limiter-flexible has no token bucket: its ' +
      'nearest limit is 200 points per 1 s fixed window, whose ideal is 200 per window begun in the run.',
    '**Busiest window**: the window between two admissions that came closest to its bound (`worstWindow` of the ' +
      "harness; ✗ marks a breach). For `TieredLimiter` the bound is the README's `capacity + rate × (W + leaseTtlMs)`; " +
      'for `RequestLimiter` the global bucket alone, `capacity + rate × W`. Admissions are stamped with ' +
      "`Date.now()` in each process; each window's bound allows 20 ms more for the stamps' lag.",
    POLICY_NOTE,
  ],
};
