import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { defineLimit } from '@tiered-limiter/core';
import { commandDelta } from './commandstats.js';
import type { AccuracyOrders, AccuracyReport, AccuracyTier, WorkerMessage } from './fleet/protocol.js';
import { peerLimitOf } from './limiters.js';
import type { BenchRedis } from './redis-target.js';

/** The shared limit the fleet saturates: the README's example. */
export const ACCURACY_CAPACITY = 100;
export const ACCURACY_RATE = 200;
export const LEASE_TTL_MS = 1000;
/** A stamp is `Date.now()` just after a decision: on a busy machine it may trail it by a few ms. */
const STAMP_SLACK_MS = 20;
const READY_TIMEOUT_MS = 30_000;
const REPORT_GRACE_MS = 15_000;

const WORKER = fileURLToPath(new URL('./fleet/accuracy-worker.ts', import.meta.url));
const BENCH_DIR = fileURLToPath(new URL('..', import.meta.url));

export const ACCURACY_TIERS: readonly { tier: AccuracyTier; limiter: string }[] = [
  { tier: 'request', limiter: 'RequestLimiter' },
  { tier: 'tiered', limiter: 'TieredLimiter' },
  { tier: 'rlf', limiter: 'RateLimiterRedis' },
];

/** The busiest window of a run, against a bound `capacity + rate × (window + extraMs)`. */
export interface WindowCheck {
  /** Admitted in the window that came closest to (or went furthest over) the bound. Bounds include the stamps' lag. */
  readonly admitted: number;
  readonly windowMs: number;
  readonly bound: number;
  /** `admitted − bound`: ≤ 0 means the bound held in every window. */
  readonly excess: number;
  /** The most admitted in any 1 s window, and the bound for 1 s. */
  readonly maxIn1s: number;
  readonly boundFor1s: number;
}

export interface AccuracyRow {
  readonly name: string;
  readonly limiter: string;
  readonly processes: number;
  readonly durationMs: number;
  readonly decisions: number;
  readonly admitted: number;
  /** What the limit should admit in the run: the token bucket's, or for rate-limiter-flexible its windows'. */
  readonly ideal: number;
  readonly idealRule: string;
  readonly admittedOfIdeal: number;
  /** Script calls Redis ran during the run (`INFO commandstats`). */
  readonly roundTrips: number;
  readonly roundTripsPer1000: number;
  /** TieredLimiter: against the README bound; RequestLimiter: against the global bucket alone. */
  readonly window: WindowCheck | null;
}

export function accuracyName(limiter: string, processes: number): string {
  return `${limiter} · accuracy, ${processes} processes`;
}

/** N processes, each with its own connection and limiter, hammer one key; Redis counts the commands. */
export async function measureAccuracy(
  target: BenchRedis,
  prefix: string,
  tier: AccuracyTier,
  limiter: string,
  processes: number,
  durationMs: number,
): Promise<AccuracyRow> {
  const limit = defineLimit({ capacity: ACCURACY_CAPACITY, refillPerSecond: ACCURACY_RATE });
  const peer = peerLimitOf(limit);
  const orders: AccuracyOrders = {
    url: target.url,
    prefix,
    key: 'shared',
    tier,
    capacity: ACCURACY_CAPACITY,
    refillPerSecond: ACCURACY_RATE,
    peer,
    instances: processes,
    leaseTtlMs: LEASE_TTL_MS,
    durationMs,
    maxDecisions: 1_000_000_000,
  };
  const before = await target.commandCalls();
  const reports = await runWorkers(orders, processes);
  const redis = commandDelta(before, await target.commandCalls());

  const stamps = reports.flatMap((r) => r.admittedAt).sort((a, b) => a - b);
  const decisions = reports.reduce((sum, r) => sum + r.decisions, 0);
  let ideal: number;
  let idealRule: string;
  if (tier === 'rlf') {
    const windows = Math.ceil(durationMs / (peer.durationS * 1000));
    ideal = peer.points * windows;
    idealRule = `${peer.points} per ${peer.durationS} s window × ${windows} window${windows === 1 ? '' : 's'}`;
  } else {
    ideal = ACCURACY_CAPACITY + (ACCURACY_RATE * durationMs) / 1000;
    idealRule = `capacity ${ACCURACY_CAPACITY} + ${ACCURACY_RATE}/s × ${durationMs / 1000} s`;
  }
  let window: WindowCheck | null = null;
  if (tier === 'tiered') window = checkWindows(stamps, ACCURACY_CAPACITY, ACCURACY_RATE, LEASE_TTL_MS);
  if (tier === 'request') window = checkWindows(stamps, ACCURACY_CAPACITY, ACCURACY_RATE, 0);
  return {
    name: accuracyName(limiter, processes),
    limiter,
    processes,
    durationMs,
    decisions,
    admitted: stamps.length,
    ideal,
    idealRule,
    admittedOfIdeal: stamps.length / ideal,
    roundTrips: redis.roundTrips,
    roundTripsPer1000: decisions === 0 ? 0 : (1000 * redis.roundTrips) / decisions,
    window,
  };
}

/**
 * The window (between two admissions) where `admitted − (capacity + rate × (window + extraMs))` is
 * largest, in one pass: with `A(k) = k − rate × t(k)`, that is the largest `A(j) − A(i)` for `i ≤ j`.
 * Each window is widened by `STAMP_SLACK_MS` for the stamps' lag.
 */
export function checkWindows(
  sorted: readonly number[],
  capacity: number,
  ratePerS: number,
  extraMs: number,
): WindowCheck {
  const perMs = ratePerS / 1000;
  const constant = capacity + perMs * (extraMs + STAMP_SLACK_MS);
  let best = { excess: Number.NEGATIVE_INFINITY, i: 0, j: 0 };
  let minA = Number.POSITIVE_INFINITY;
  let minAt = 0;
  for (let k = 0; k < sorted.length; k++) {
    const a = k - perMs * sorted[k]!;
    if (a < minA) {
      minA = a;
      minAt = k;
    }
    const excess = a - minA + 1 - constant;
    if (excess > best.excess) best = { excess, i: minAt, j: k };
  }
  let maxIn1s = 0;
  for (let i = 0, j = 0; j < sorted.length; j++) {
    while (sorted[j]! - sorted[i]! >= 1000) i++;
    if (j - i + 1 > maxIn1s) maxIn1s = j - i + 1;
  }
  if (sorted.length === 0) {
    const boundFor1s = capacity + perMs * (1000 + extraMs + STAMP_SLACK_MS);
    return { admitted: 0, windowMs: 0, bound: constant, excess: -constant, maxIn1s, boundFor1s };
  }
  const windowMs = sorted[best.j]! - sorted[best.i]!;
  return {
    admitted: best.j - best.i + 1,
    windowMs,
    bound: capacity + perMs * (windowMs + extraMs + STAMP_SLACK_MS),
    excess: best.excess,
    maxIn1s,
    boundFor1s: capacity + perMs * (1000 + extraMs + STAMP_SLACK_MS),
  };
}

async function runWorkers(orders: AccuracyOrders, processes: number): Promise<AccuracyReport[]> {
  const children: ChildProcess[] = [];
  const kill = () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  };
  try {
    const ready: Promise<void>[] = [];
    const reports: Promise<AccuracyReport>[] = [];
    for (let i = 0; i < processes; i++) {
      const child = fork(WORKER, [JSON.stringify(orders)], {
        cwd: BENCH_DIR,
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
      });
      children.push(child);
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString()).slice(-4000);
      });
      const exited = new Promise<never>((_, reject) =>
        child.once('exit', (code, signal) =>
          reject(new Error(`accuracy worker exited (${code ?? signal}) before reporting: ${stderr}`)),
        ),
      );
      exited.catch(() => {});
      ready.push(
        Promise.race([
          exited,
          new Promise<void>((resolve) =>
            child.on('message', (m: WorkerMessage) => m.type === 'ready' && resolve()),
          ),
        ]),
      );
      reports.push(
        Promise.race([
          exited,
          new Promise<AccuracyReport>((resolve) =>
            child.on('message', (m: WorkerMessage) => m.type === 'report' && resolve(m.report)),
          ),
        ]),
      );
    }
    await withTimeout(Promise.all(ready), READY_TIMEOUT_MS, 'accuracy workers not ready');
    // Every worker is connected: all start at one wall-clock instant, shortly from now.
    const startAt = Date.now() + 100;
    for (const child of children) child.send({ type: 'start', startAt });
    return await withTimeout(
      Promise.all(reports),
      orders.durationMs + REPORT_GRACE_MS,
      'accuracy workers did not report',
    );
  } finally {
    kill();
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${message} within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
