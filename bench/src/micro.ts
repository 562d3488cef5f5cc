import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { internal, type LimitSpec } from '@tiered-limiter/core';
import { LocalLimiter, MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { bucketKeys } from '@tiered-limiter/redis';
import { Bench } from 'tinybench';
import { count, duration, times } from './format.js';
import { MANY_KEYS } from './key-sets.js';
import { rlfMemory, rlfOutcome } from './limiters.js';
import { type BenchLimit, BITES_10, CEILING, peerLimitOf } from './limits.js';
import { ADMITTED } from './loop.js';
import type { BenchSettings, Column, RunContext, Section } from './section.js';

const { fullBucket, tryTake } = internal;

/**
 * Operations per tinybench iteration. tinybench reads the clock around each call of a task; a
 * clock read costs about as much as a lease decision, so each call runs a batch and the batch's
 * time is divided by its size.
 */
export const OPS_PER_ITERATION = 1000;

/** Counts of what the limiter decided over the timed iterations. */
interface Tally {
  allowed: number;
  denied: number;
  /** `tryConsume` could not answer (the two-tier limiter had to go to its store). */
  misses: number;
}

/** A task made ready to time: `run` makes `OPS_PER_ITERATION` decisions. */
interface Prepared {
  readonly run: () => unknown;
  /** Between iterations, as a server yields between requests (lets lease refills land). */
  readonly between?: () => Promise<void>;
  readonly close?: () => Promise<void>;
}

export interface MicroTask {
  readonly name: string;
  /** The row this one is compared with (a speed ratio), if any. */
  readonly peer?: string;
  readonly prepare: (tally: Tally) => Promise<Prepared> | Prepared;
}

export interface MicroRow {
  readonly name: string;
  readonly nsPerOp: number;
  /** p99 of the per-operation mean of each batch of `OPS_PER_ITERATION`. */
  readonly p99NsPerOp: number;
  readonly opsPerSecond: number;
  /** tinybench's relative margin of error of the mean, %. */
  readonly rme: number;
  readonly samples: number;
  /** Decisions over the timed part and warm-up; `null` for rows that make none. */
  readonly allowed: number | null;
  readonly denied: number | null;
  readonly misses: number | null;
  readonly peer: string | null;
  /** The peer's ns per op over this row's: how many times faster. */
  timesPeer: number | null;
  /** ns per op over `performance.now()`'s. */
  clockReads: number | null;
}

export const CLOCK_BASELINE = 'baseline · performance.now()';
const HOT = 'user:1';
let sink = 0;

function times1000(step: () => void): () => void {
  return () => {
    for (let i = 0; i < OPS_PER_ITERATION; i++) step();
  };
}

function local(limit: BenchLimit, keys: readonly string[], tally: Tally): Prepared {
  const limiter = new LocalLimiter({ limits: limit.spec, maxKeys: MANY_KEYS });
  let cursor = 0;
  return {
    run: times1000(() => {
      const key = keys[cursor]!;
      cursor = cursor + 1 === keys.length ? 0 : cursor + 1;
      if (limiter.tryConsume(key).allowed) tally.allowed++;
      else tally.denied++;
    }),
  };
}

function rlf(limit: BenchLimit, tally: Tally): Prepared {
  const limiter = rlfMemory(peerLimitOf(limit.spec));
  return {
    run: async () => {
      for (let i = 0; i < OPS_PER_ITERATION; i++) {
        if ((await rlfOutcome(limiter, HOT)) === ADMITTED) tally.allowed++;
        else tally.denied++;
      }
    },
  };
}

/** The two-tier limiter on a `MemoryStore`, its lease for the hot key filled before timing. */
async function leaseHit(spec: LimitSpec, tally: Tally): Promise<Prepared> {
  // Leases on demand: the lease refills at its low-water mark, ahead of need, so the timed calls
  // are hits. With the periodic sync a lease grows only at the sync (every 20 ms on one instance),
  // and a loop of 40 M calls a second spent it in a millisecond: 86 % of the timed calls were
  // misses, and the row timed the miss path (`lease misses` keeps it honest).
  const limiter = new TieredLimiter({
    store: new MemoryStore(),
    limits: spec,
    failurePolicy: 'open',
    sync: false,
  });
  // Traffic with yields, so that refills land and the batch grows to its horizon.
  for (let round = 0; round < 20; round++) {
    for (let i = 0; i < OPS_PER_ITERATION; i++) limiter.tryConsume(HOT) ?? (await limiter.consume(HOT));
    await yieldToLoop();
  }
  return {
    run: times1000(() => {
      const decision = limiter.tryConsume(HOT);
      if (decision === undefined) tally.misses++;
      else if (decision.allowed) tally.allowed++;
      else tally.denied++;
    }),
    between: () => yieldToLoop(),
    close: () => limiter.close(),
  };
}

function keyEscaping(key: string): Prepared {
  const limits = [CEILING.spec];
  return { run: times1000(() => (sink += bucketKeys('api', key, limits)[0]!.length)) };
}

export function microTasks(): MicroTask[] {
  const manyKeys = Array.from({ length: MANY_KEYS }, (_, i) => `user:${i}`);
  const pass = (key: string) => key.length;
  return [
    { name: 'baseline · no limiter', prepare: () => ({ run: times1000(() => (sink += pass(HOT))) }) },
    { name: CLOCK_BASELINE, prepare: () => ({ run: times1000(() => (sink += performance.now())) }) },
    {
      name: 'core · bucket step (tryTake, clock as argument) · ceiling',
      prepare: () => {
        const state = fullBucket(CEILING.spec, 0);
        let nowMs = 0;
        return {
          run: times1000(() => {
            nowMs += 0.001;
            if (tryTake(state, CEILING.spec, 1, nowMs)) sink++;
          }),
        };
      },
    },
    {
      name: 'LocalLimiter · 1 hot key · ceiling',
      peer: 'RateLimiterMemory · 1 hot key · ceiling',
      prepare: (t) => local(CEILING, [HOT], t),
    },
    {
      name: 'LocalLimiter · 1 hot key · 100 at 10/s',
      peer: 'RateLimiterMemory · 1 hot key · 100 at 10/s',
      prepare: (t) => local(BITES_10, [HOT], t),
    },
    { name: 'LocalLimiter · 100k keys · ceiling', prepare: (t) => local(CEILING, manyKeys, t) },
    { name: 'RateLimiterMemory · 1 hot key · ceiling', prepare: (t) => rlf(CEILING, t) },
    { name: 'RateLimiterMemory · 1 hot key · 100 at 10/s', prepare: (t) => rlf(BITES_10, t) },
    {
      name: 'TieredLimiter · lease hit (MemoryStore) · ceiling',
      peer: 'LocalLimiter · 1 hot key · ceiling',
      prepare: (t) => leaseHit(CEILING.spec, t),
    },
    { name: 'keys · bucketKeys · plain key', prepare: () => keyEscaping('user-42') },
    { name: 'keys · bucketKeys · escaped key', prepare: () => keyEscaping('user:42/ünïcode') },
    { name: 'keys · bucketKeys · hashed key (200 chars)', prepare: () => keyEscaping('k'.repeat(200)) },
  ];
}

export async function measureMicro(task: MicroTask, context: RunContext): Promise<MicroRow> {
  const { settings } = context;
  const tally: Tally = { allowed: 0, denied: 0, misses: 0 };
  const prepared = await task.prepare(tally);
  const bench = new Bench({ time: settings.microMs, warmupTime: settings.microWarmupMs });
  bench.add(task.name, prepared.run, prepared.between ? { afterEach: prepared.between } : {});
  try {
    (globalThis as { gc?: () => void }).gc?.();
    await bench.run();
  } finally {
    await prepared.close?.();
  }
  const result = bench.tasks[0]!.result;
  if (result.state !== 'completed') {
    throw new Error(`${task.name}: tinybench ${result.state}${'error' in result ? `: ${result.error}` : ''}`);
  }
  const nsPerOp = (result.latency.mean * 1e6) / OPS_PER_ITERATION;
  const decides = tally.allowed + tally.denied + tally.misses > 0;
  return {
    name: task.name,
    nsPerOp,
    p99NsPerOp: (result.latency.p99 * 1e6) / OPS_PER_ITERATION,
    opsPerSecond: 1e9 / nsPerOp,
    rme: result.latency.rme,
    samples: result.latency.samplesCount,
    allowed: decides ? tally.allowed : null,
    denied: decides ? tally.denied : null,
    misses: decides ? tally.misses : null,
    peer: task.peer ?? null,
    timesPeer: null,
    clockReads: null,
  };
}

/** Speed ratios to each row's peer and to a clock read, when those rows ran. */
export function relateMicro(rows: MicroRow[]): void {
  const byName = new Map(rows.map((row) => [row.name, row]));
  const clock = byName.get(CLOCK_BASELINE);
  for (const row of rows) {
    const peer = row.peer === null ? undefined : byName.get(row.peer);
    row.timesPeer = peer === undefined ? null : peer.nsPerOp / row.nsPerOp;
    row.clockReads = clock === undefined ? null : row.nsPerOp / clock.nsPerOp;
  }
}

const orDash = (n: number | null) => (n === null ? '—' : count(n));

const COLUMNS: readonly Column<MicroRow>[] = [
  { title: 'per op', cell: (r) => duration(r.nsPerOp) },
  { title: 'p99 per op', cell: (r) => duration(r.p99NsPerOp) },
  { title: 'ops/s', cell: (r) => count(r.opsPerSecond) },
  { title: '± %', cell: (r) => r.rme.toFixed(1) },
  {
    title: '× performance.now()',
    cell: (r) => (r.clockReads === null ? '—' : `${r.clockReads.toFixed(2)}×`),
  },
  { title: 'speed × peer', cell: (r) => (r.timesPeer === null ? '—' : times(r.timesPeer)) },
  { title: 'allowed', cell: (r) => orDash(r.allowed) },
  { title: 'denied', cell: (r) => orDash(r.denied) },
  { title: 'lease misses', cell: (r) => orDash(r.misses) },
];

export const microSection: Section<MicroTask, MicroRow> = {
  id: 'micro',
  title: 'In process (tinybench): one decision at a time, no Redis',
  tasks: () => microTasks(),
  measure: measureMicro,
  baseline: CLOCK_BASELINE,
  usesRedis: false,
  progress: (row) =>
    `${row.name}: ${duration(row.nsPerOp)} per op (± ${row.rme.toFixed(1)} %)` +
    (row.allowed === null ? '' : `, ${count(row.allowed)} allowed, ${count(row.denied ?? 0)} denied`) +
    (row.misses ? `, ${count(row.misses)} lease misses` : ''),
  columns: COLUMNS,
  finish: relateMicro,
  notes: (s: BenchSettings) => [
    `tinybench ${s.microMs} ms per task after ${s.microWarmupMs} ms of warm-up. Each tinybench iteration makes ` +
      `${count(OPS_PER_ITERATION)} operations (a clock read around each would cost more than the operation); ` +
      '**per op** is the mean iteration time over that, **p99 per op** the p99 of the iterations. ' +
      '`× performance.now()` is the cost in clock reads; **speed × peer** is how many times faster than the peer ' +
      "row (`RateLimiterMemory` for `LocalLimiter`; the clock-reading `LocalLimiter` for the two-tier limiter's " +
      'lease hit).',
    '`TieredLimiter · lease hit` runs on a `MemoryStore` after its lease for the key was filled, with leases on demand ' +
      '(`sync: false`: the lease refills ahead of need, and the hit path is the same with the sync); it yields to ' +
      'the event loop between iterations (untimed), so refills land as in a server. **lease misses** counts ' +
      '`tryConsume` calls that could not answer from the lease: they would have awaited the store. ' +
      '`RateLimiterMemory` answers with a promise, awaited in the loop: its real cost to a caller. ' +
      '`core · bucket step` is the bucket arithmetic alone, the clock passed as an argument.',
  ],
};
