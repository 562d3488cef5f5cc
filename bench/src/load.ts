import { type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';
import { commandDelta } from '@tiered-limiter/test-harness';
import { type Accounted, columns, decisionWords } from './columns.js';
import { count, duration, percent, small, times } from './format.js';
import { type Health, loopCell, POLICY_NOTE, type PolicyCount, watchHealth } from './health.js';
import { keysOf } from './key-sets.js';
import { MANY_KEYS_LIMITERS } from './keys.js';
import { THROUGHPUT_TIMEOUT_MS } from './limiters.js';
import { BITES_10 } from './limits.js';
import { PACED_TICK_MS, runPaced } from './paced-loop.js';
import type { BenchSettings, Column, RunContext, Section, Task } from './section.js';
import { STEADY_MEASURE_MS, STEADY_WARMUP_MS } from './throughput.js';
import { PEER, type ThroughputTask } from './throughput-row.js';

/**
 * The load every row is offered, decisions a second: one the peer keeps up with on a 2-core
 * machine with room to spare (it made 53–226 k a second at 64 in flight on the machines the bench
 * ran on), so that every row does the same work and only what it costs differs.
 */
export const LOAD_PER_SECOND = 25_000;
/** The many-keys rows' limit, as their limiters are set up for. */
const LIMIT = BITES_10;

export interface LoadTask extends Task {
  readonly limiter: string;
  readonly peer: string | undefined;
  readonly make: ThroughputTask['make'];
}

/** Garbage collection in the row's process while it was timed. */
export interface GcSeen {
  readonly pauses: number;
  readonly totalMs: number;
  readonly maxMs: number;
}

export interface LoadRow extends Accounted {
  readonly limiter: string;
  readonly peer: string | null;
  readonly offeredPerSecond: number;
  readonly elapsedMs: number;
  readonly opsPerSecond: number;
  readonly awaitedShare: number;
  /** p99 of the awaited decisions' time to an answer, ns; 0 when none awaited. */
  readonly awaitedP99Ns: number;
  /** The process's CPU time (user and system, every thread) per decision, µs. */
  readonly cpuUsPerDecision: number;
  /** The same over the timed part's wall time: 1 is one core kept busy. */
  readonly cpuShare: number;
  readonly gc: GcSeen;
  readonly roundTripsPer1000: number;
  readonly redisUsPerDecision: number;
  /** The server's whole CPU (`INFO cpu`: commands, I/O, expiry) per decision, µs. */
  readonly redisCpuUsPerDecision: number;
  /** The peer's CPU per decision over this row's: how many times less CPU this limiter costs. */
  timesPeerCpu: number | null;
}

const nameOf = (limiter: string) =>
  `${limiter} · 100k keys Zipf · ${LIMIT.short} · ${count(LOAD_PER_SECOND)}/s`;

export function loadTasks(): LoadTask[] {
  return MANY_KEYS_LIMITERS.map(([limiter, make]) => ({
    name: nameOf(limiter),
    limiter,
    peer: nameOf(PEER),
    make,
  }));
}

/** Counts the process's garbage collections until `stop()`. */
function watchGc(): { stop(): GcSeen } {
  let pauses = 0;
  let totalMs = 0;
  let maxMs = 0;
  const take = (entries: readonly PerformanceEntry[]) => {
    for (const entry of entries) {
      pauses++;
      totalMs += entry.duration;
      if (entry.duration > maxMs) maxMs = entry.duration;
    }
  };
  const observer = new PerformanceObserver((list) => take(list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  return {
    stop() {
      take(observer.takeRecords());
      observer.disconnect();
      return { pauses, totalMs, maxMs };
    },
  };
}

/** A fresh limiter at the offered load: warmed up at it, then timed at it. */
export async function measureLoad(task: LoadTask, context: RunContext): Promise<LoadRow> {
  const { target, settings } = context;
  if (target === undefined) throw new Error('fixed-load rows need Redis');
  const client = await target.client();
  const subject = task.make(client, context.prefix);
  try {
    const keys = keysOf('zipf');
    (globalThis as { gc?: () => void }).gc?.();
    const warmMs = settings.quick ? 1000 : STEADY_WARMUP_MS;
    const warm = await runPaced(subject.decider, keys, LOAD_PER_SECOND, warmMs);
    const before = await target.commandStats();
    const redisCpuBefore = await target.serverCpuSeconds();
    const health = watchHealth(target.probe);
    const gc = watchGc();
    const cpuBefore = process.cpuUsage();
    const measureMs = settings.quick ? settings.measureMs : STEADY_MEASURE_MS;
    const result = await runPaced(subject.decider, keys, LOAD_PER_SECOND, measureMs, warm.cursor);
    const cpu = process.cpuUsage(cpuBefore);
    const gcSeen = gc.stop();
    const seen: Health = await health.stop();
    const redis = commandDelta(before, await target.commandStats());
    const redisCpuSeconds = (await target.serverCpuSeconds()) - redisCpuBefore;
    const [denied, allowed, policyDenied, policyAllowed] = result.tally;
    const cpuUs = cpu.user + cpu.system;
    const policy: PolicyCount | null = subject.showsPolicy
      ? { allowed: policyAllowed, denied: policyDenied }
      : null;
    return {
      name: task.name,
      limiter: task.limiter,
      peer: task.peer ?? null,
      offeredPerSecond: LOAD_PER_SECOND,
      decisions: result.decisions,
      elapsedMs: result.elapsedMs,
      opsPerSecond: (result.decisions * 1000) / result.elapsedMs,
      allowed,
      denied,
      policy,
      health: seen,
      awaitedShare: result.awaited / result.decisions,
      awaitedP99Ns: result.awaited === 0 ? 0 : result.awaitedNs.getValueAtPercentile(99),
      cpuUsPerDecision: cpuUs / result.decisions,
      cpuShare: cpuUs / 1000 / result.elapsedMs,
      gc: gcSeen,
      roundTripsPer1000: (1000 * redis.roundTrips) / result.decisions,
      redisUsPerDecision: redis.roundTripUsec / result.decisions,
      redisCpuUsPerDecision: (redisCpuSeconds * 1e6) / result.decisions,
      timesPeerCpu: null,
    };
  } finally {
    await subject.close();
    client.disconnect();
  }
}

function relate(rows: LoadRow[]): void {
  const byName = new Map(rows.map((row) => [row.name, row]));
  for (const row of rows) {
    const peer = row.peer === null ? undefined : byName.get(row.peer);
    row.timesPeerCpu = peer === undefined ? null : peer.cpuUsPerDecision / row.cpuUsPerDecision;
  }
}

const gcCell = (r: LoadRow) =>
  r.gc.pauses === 0
    ? '0'
    : `${small((r.gc.totalMs * 1000) / r.elapsedMs)} ms/s, ${small(r.gc.totalMs / r.gc.pauses)} / ${small(r.gc.maxMs)} ms`;

const COLUMNS: readonly Column<LoadRow>[] = [
  { title: 'decisions/s', cell: (r) => count(r.opsPerSecond) },
  ...columns.decisions<LoadRow>(),
  { title: 'CPU µs / decision', cell: (r) => small(r.cpuUsPerDecision) },
  { title: 'CPU (1 = a core)', cell: (r) => small(r.cpuShare) },
  { title: '× less CPU than peer', cell: (r) => (r.timesPeerCpu === null ? '—' : times(r.timesPeerCpu)) },
  { title: 'GC: time, pause mean / max', cell: gcCell },
  { title: 'awaited', cell: (r) => percent(r.awaitedShare, 2) },
  { title: 'awaited p99', cell: (r) => (r.awaitedP99Ns === 0 ? '—' : duration(r.awaitedP99Ns)) },
  columns.roundTrips<LoadRow>(),
  { title: 'Redis µs / decision', cell: (r) => small(r.redisUsPerDecision) },
  { title: 'Redis CPU µs / decision', cell: (r) => small(r.redisCpuUsPerDecision) },
  columns.loop<LoadRow>(),
  columns.probe<LoadRow>(),
];

export const loadSection: Section<LoadTask, LoadRow> = {
  id: 'load',
  title: `Fixed load: ${count(LOAD_PER_SECOND)} decisions a second on 100,000 keys drawn by Zipf's law, what each limiter costs its process`,
  usesRedis: true,
  tasks: () => loadTasks(),
  measure: measureLoad,
  progress: (row) =>
    `${row.name}: ${count(row.opsPerSecond)} decisions/s (${decisionWords(row)}), ` +
    `CPU ${small(row.cpuUsPerDecision)} µs per decision (${small(row.cpuShare)} of a core), GC ${gcCell(row)}, ` +
    `awaited ${percent(row.awaitedShare, 2)}, loop ${loopCell(row.health)}`,
  columns: COLUMNS,
  finish: relate,
  notes: (s: BenchSettings) => [
    `**Load**: every row is offered ${count(LOAD_PER_SECOND)} decisions a second over the Zipf key sequence of the ` +
      `many-keys rows, at ${LIMIT.short} per key: every ${PACED_TICK_MS} ms the decisions that fell due are ` +
      'issued, each answered at once when the limiter can (`tryConsume`), else started and left to answer while the ' +
      'next ones go out, as a service at a steady load meets them. The throughput rows are closed loops: how much a ' +
      'limiter can do. These hold the work still and show what it costs. ' +
      (s.quick
        ? 'A quick run warms up for 1 s.'
        : `Each row: a fresh limiter, ${count(STEADY_WARMUP_MS)} ms at the load to warm up, then ${count(STEADY_MEASURE_MS)} ms timed.`),
    "**CPU µs / decision**: the process's CPU time (`process.cpuUsage()`, user and system, every thread: the garbage " +
      "collector's helpers and libuv's too) over the timed part, per decision; **CPU**: the same per second of wall " +
      "time (1 is one core busy). **× less CPU than peer**: the peer's CPU per decision over the row's. **GC**: " +
      'garbage collection in the process (`PerformanceObserver`, `gc` entries): ms of it per second, and the mean ' +
      "and longest pause. **Redis CPU µs / decision**: all the server's CPU (`INFO cpu`, user and system: " +
      'commands, I/O and expiry) over the timed part, per decision; at one load for every row, what each limiter ' +
      'costs the server.',
    `**awaited p99**: the time awaited decisions took, from the request to the answer (the store timeout is ${THROUGHPUT_TIMEOUT_MS} ms). ` +
      'Limiters, store timeout and failure policy as in the many-keys rows.',
    POLICY_NOTE,
  ],
};
