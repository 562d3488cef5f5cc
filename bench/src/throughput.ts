import { type CommandStats, commandDelta } from '@tiered-limiter/test-harness';
import { columns, decisionWords } from './columns.js';
import { count, duration, small, times } from './format.js';
import { loopCell, POLICY_NOTE, type ProbeWindows, watchHealth } from './health.js';
import { type KeySet, keysOf, MANY_KEYS } from './key-sets.js';
import {
  type BenchClient,
  bareStore,
  noLimiter,
  requestLimiter,
  rlfRedis,
  THROUGHPUT_TIMEOUT_MS,
  tieredLimiter,
} from './limiters.js';
import { type BenchLimit, BITES_10, BITES_200, CEILING, KEYS_BITE, peerLimitOf } from './limits.js';
import { DECISIONS_PER_YIELD, type Decider, type LoopBounds, runLoop } from './loop.js';
import type { BenchSettings, Column, RunContext, Section } from './section.js';
import { watchSyncPeriod } from './sync-period.js';
import { PEER, relateToPeers, type ThroughputRow, type ThroughputTask, taskName } from './throughput-row.js';
import { type StampedKeys, stampKeys } from './windows.js';

export type { ThroughputRow };
export { MANY_KEYS };

const LIMITERS: readonly [string, (limit: BenchLimit) => ThroughputTask['make']][] = [
  ['RedisStore.take', (l) => (redis, prefix) => bareStore(redis, prefix, l.spec)],
  ['RequestLimiter', (l) => (redis, prefix) => requestLimiter(redis, prefix, l.spec)],
  ['TieredLimiter', (l) => (redis, prefix) => tieredLimiter(redis, prefix, l.spec, { maxKeys: MANY_KEYS })],
  [PEER, (l) => (redis, prefix) => rlfRedis(redis, prefix, peerLimitOf(l.spec))],
];

/** Limits and the scenarios each runs: the ones that bite first (the headline), the ceiling last. */
const SCENARIOS: readonly [BenchLimit, KeySet, readonly number[]][] = [
  [BITES_10, 'hot', [1, 64]],
  [BITES_200, 'hot', [1, 64]],
  [KEYS_BITE, 'many', [64]],
  [CEILING, 'hot', [1, 64, 256]],
  [CEILING, 'many', [64]],
];

export const LOOP_BASELINE = 'baseline · no limiter · 1 hot key · ceiling';

export function throughputTasks(): ThroughputTask[] {
  const tasks: ThroughputTask[] = [];
  for (const [limit, keys, inFlights] of SCENARIOS) {
    for (const inFlight of inFlights) {
      for (const [limiter, make] of LIMITERS) {
        tasks.push({
          name: taskName(limiter, keys, limit, inFlight),
          limiter,
          keys,
          limit,
          inFlight,
          peer: taskName(PEER, keys, limit, inFlight),
          make: make(limit),
          // Every 100,000-key row in steady state: at the per-key limit the one pass of `warmupBounds`
          // comes first (it brings every key to its limit), then the rest of the steady warm-up.
          ...(keys === 'many' ? { steady: true } : {}),
        });
      }
    }
  }
  // The loop alone, one at a time and at 64 in flight: its share of a hot-key row's decision (a yield
  // is a whole turn of the event loop for one worker, a fraction of one for 64).
  for (const inFlight of [1, 64]) {
    tasks.push({
      name: inFlight === 1 ? LOOP_BASELINE : `${LOOP_BASELINE} · ${inFlight} in flight`,
      limiter: 'baseline',
      keys: 'hot',
      limit: CEILING,
      inFlight,
      peer: undefined,
      make: () => noLimiter(),
    });
  }
  return tasks;
}

/**
 * Longest warm-up pass over the 100,000 keys. rate-limiter-flexible needs about a minute: with
 * `inMemoryBlockOnConsumed`, each key it blocks slows it down (1.5 k fresh keys/s here, against 19 k
 * without the option).
 */
const FULL_PASS_MAX_MS = 90_000;

/**
 * The warm-up. At a per-key limit that bites, the 100,000 keys taken in turn would each be seen
 * once at most in a row's time, always with a full bucket: the limit would never bite. A full run
 * therefore warms up with one pass over every key, so that the timed part meets each key again,
 * at its limit. A quick run skips it: its numbers only show that the bench works.
 */
function warmupBounds(task: ThroughputTask, settings: BenchSettings): LoopBounds {
  if (task.keys === 'many' && !task.limit.ceiling && !settings.quick) {
    return { maxMs: FULL_PASS_MAX_MS, maxDecisions: MANY_KEYS };
  }
  return { maxMs: settings.warmupMs, maxDecisions: settings.maxDecisions };
}

/**
 * How long a full run warms a `steady` row up at least: three sync periods at their longest (5 s)
 * and a second more, so that the timed part meets the keys as a long-running service does: each
 * key the row's limiter keeps has had its first take, its first lease, and syncs enough for its
 * rate estimate (the mean of its first syncs, then a moving average) to reach the row's traffic.
 * After 500 ms the timed part was the two-tier limiter's first and second meeting with most keys
 * (a round trip each; the cold-key rows time those on their own). After 6 s every key had had one
 * sync, which measured the warm-up's first pass, slowed by a take per cold key: its leases fell
 * short of the row's traffic, and 5.9–6.4 % of the timed decisions waited on Redis, against
 * 1.7–2.6 % after 16 s (100,000 keys in turn, 64 in flight: 6.2× and 8.1× the peer, against 8.3×
 * and 15.7×). Every limiter of a row gets the same.
 */
export const STEADY_WARMUP_MS = 16_000;

/**
 * How long a full run times a `steady` row: longer than a sync period, so that the figure spans
 * a whole round of the sync. Timed over 2 s, the same two-tier row measured 2.4–4.7× the peer
 * from run to run, by where in the round its 2 s fell.
 */
export const STEADY_MEASURE_MS = 6_000;

/**
 * Warms a row's limiter up: `warmupBounds`, then, for a `steady` row in a full run, on to
 * `STEADY_WARMUP_MS` in all. Resolves the decisions and time it took, and where the keys stopped.
 */
async function warmUp(
  decider: Decider,
  keys: readonly string[],
  task: ThroughputTask,
  settings: BenchSettings,
): Promise<{ decisions: number; elapsedMs: number; cursor: number }> {
  const first = await runLoop(decider, keys, task.inFlight, warmupBounds(task, settings));
  const restMs = STEADY_WARMUP_MS - first.elapsedMs;
  if (task.steady !== true || settings.quick || restMs <= 0) return first;
  const rest = await runLoop(
    decider,
    keys,
    task.inFlight,
    { maxMs: restMs, maxDecisions: settings.maxDecisions },
    first.cursor,
  );
  return {
    decisions: first.decisions + rest.decisions,
    elapsedMs: first.elapsedMs + rest.elapsedMs,
    cursor: rest.cursor,
  };
}

/** How long a row is timed: `STEADY_MEASURE_MS` for a `steady` row in a full run. */
function measureMsOf(task: ThroughputTask, settings: BenchSettings): number {
  return task.steady === true && !settings.quick ? STEADY_MEASURE_MS : settings.measureMs;
}

/** The Redis a row runs on: a client for its limiter, the server's counters, and a probe watching it. */
export interface RowServer {
  readonly client: BenchClient;
  commandStats(): Promise<CommandStats>;
  /** CPU seconds the server (every master of a Cluster) has used: `INFO cpu`. */
  serverCpuSeconds(): Promise<number>;
  readonly probe: ProbeWindows | undefined;
}

/** Warms a fresh limiter up, then times it, counting Redis's commands and watching health around the timed part. */
export async function measureOn(
  task: ThroughputTask,
  server: RowServer,
  prefix: string,
  settings: BenchSettings,
): Promise<ThroughputRow> {
  const keys = keysOf(task.keys);
  const subject = task.make(server.client, prefix);
  const stamped: StampedKeys | undefined =
    task.checked === undefined ? undefined : stampKeys(subject.decider, task.checked.keys);
  const decider = stamped?.decider ?? subject.decider;
  const period = watchSyncPeriod(subject.syncPeriodMs);
  try {
    (globalThis as { gc?: () => void }).gc?.();
    const warm = await warmUp(decider, keys, task, settings);
    stamped?.clear();
    const before = await server.commandStats();
    const cpuBefore = await server.serverCpuSeconds();
    const storeBefore = subject.storeStats?.();
    const watch = watchHealth(server.probe);
    const bounds = { maxMs: measureMsOf(task, settings), maxDecisions: settings.maxDecisions };
    const result = await runLoop(decider, keys, task.inFlight, bounds, warm.cursor);
    const syncPeriodMs = period.stop();
    const health = await watch.stop();
    const redis = commandDelta(before, await server.commandStats());
    const redisCpuSeconds = (await server.serverCpuSeconds()) - cpuBefore;
    const storeAfter = subject.storeStats?.();
    const [denied, allowed, policyDenied, policyAllowed] = result.tally;
    const h = result.latencyNs;
    const calls = storeAfter && storeBefore ? storeAfter.calls - storeBefore.calls : 0;
    return {
      name: task.name,
      limiter: task.limiter,
      keys: task.keys === 'hot' ? 1 : MANY_KEYS,
      keySet: task.keys,
      limit: task.limit.short,
      limitTitle: task.limit.title,
      ceiling: task.limit.ceiling,
      inFlight: task.inFlight,
      peer: task.peer ?? null,
      decisions: result.decisions,
      elapsedMs: result.elapsedMs,
      opsPerSecond: (result.decisions * 1000) / result.elapsedMs,
      p50Ns: h.getValueAtPercentile(50),
      p99Ns: h.getValueAtPercentile(99),
      p999Ns: h.getValueAtPercentile(99.9),
      allowed,
      denied,
      policy: subject.showsPolicy ? { allowed: policyAllowed, denied: policyDenied } : null,
      health,
      awaitedShare: result.awaited / result.decisions,
      warmup: { decisions: warm.decisions, ms: warm.elapsedMs },
      roundTrips: redis.roundTrips,
      roundTripsPer1000: (1000 * redis.roundTrips) / result.decisions,
      redisUsPerDecision: redis.roundTripUsec / result.decisions,
      redisCpuUsPerDecision: (redisCpuSeconds * 1e6) / result.decisions,
      redisCommandsByName: redis.byCommand,
      storeCalls: storeAfter && storeBefore ? calls : null,
      keyOpsPerCall:
        storeAfter && storeBefore && calls > 0 ? (storeAfter.keys - storeBefore.keys) / calls : null,
      syncPeriodMs,
      // A stamp is taken when the decision is known: an awaited one up to its latency after the store
      // decided, so each window's bound allows the longest wait of the row more; and with the periodic
      // sync, a lease may borrow a period's refill (README's `T`), the longest period of the row.
      window:
        stamped === undefined || task.checked === undefined
          ? null
          : stamped.check(task.checked.bound, h.maxValue / 1e6 + (syncPeriodMs ?? 0), task.checked.pieceMs),
      timesPeer: null,
    };
  } finally {
    period.stop();
    await subject.close();
  }
}

/** A throughput row on the run's Redis. */
export async function measureThroughput(task: ThroughputTask, context: RunContext): Promise<ThroughputRow> {
  const { target, settings } = context;
  if (target === undefined) throw new Error('throughput rows need Redis');
  const client = await target.client();
  try {
    return await measureOn(
      task,
      {
        client,
        commandStats: () => target.commandStats(),
        serverCpuSeconds: () => target.serverCpuSeconds(),
        probe: target.probe,
      },
      context.prefix,
      settings,
    );
  } finally {
    client.disconnect();
  }
}

/** Share of decisions that awaited a promise: 100 %, 0.1 %, 0. */
function awaitedCell(share: number): string {
  if (share === 0) return '0';
  if (share >= 0.995) return `${(share * 100).toFixed(0)} %`;
  return share >= 0.001 ? `${(share * 100).toFixed(1)} %` : `${(share * 100).toFixed(3)} %`;
}

/** Columns of a throughput row, shown by every table of them (this section's, many keys', Cluster's). */
export const throughputColumns = {
  rate: { title: 'decisions/s', cell: (r) => count(r.opsPerSecond) },
  redisUs: { title: 'Redis µs / decision', cell: (r) => small(r.redisUsPerDecision) },
  redisCpu: { title: 'Redis CPU µs / decision', cell: (r) => small(r.redisCpuUsPerDecision) },
  keyOps: { title: 'key-ops / call', cell: (r) => (r.keyOpsPerCall === null ? '—' : small(r.keyOpsPerCall)) },
  timesPeer: { title: '× peer', cell: (r) => (r.timesPeer === null ? '—' : times(r.timesPeer)) },
  awaited: { title: 'awaited', cell: (r) => awaitedCell(r.awaitedShare) },
} satisfies Record<string, Column<ThroughputRow>>;

const COLUMNS: readonly Column<ThroughputRow>[] = [
  throughputColumns.rate,
  ...columns.decisions<ThroughputRow>(),
  ...columns.latency<ThroughputRow>(),
  columns.roundTrips<ThroughputRow>((r) => r.limiter !== 'baseline'),
  throughputColumns.timesPeer,
  throughputColumns.awaited,
  columns.loop<ThroughputRow>(),
  columns.probe<ThroughputRow>(),
];

/** A throughput row's progress line (the Cluster section's too). */
export function throughputProgress(row: ThroughputRow): string {
  return (
    `${row.name}: ${count(row.opsPerSecond)} decisions/s (${decisionWords(row)}), p99 ${duration(row.p99Ns)}, ` +
    `${small(row.roundTripsPer1000)} Redis RT per 1,000, loop ${loopCell(row.health)}`
  );
}

export const throughputSection: Section<ThroughputTask, ThroughputRow> = {
  id: 'throughput',
  title: 'Throughput on Redis: many requests in flight (hand-written loop)',
  usesRedis: true,
  tasks: () => throughputTasks(),
  baseline: LOOP_BASELINE,
  measure: measureThroughput,
  progress: throughputProgress,
  columns: COLUMNS,
  group: (row) => row.limitTitle,
  finish: relateToPeers,
  notes: (s: BenchSettings) => [
    '**Limits**: the headline rows use limits that bite (a hot key at capacity 100 refilled 10 or 200 per second; ' +
      '100,000 keys at capacity 1, one per 10 s), so most decisions are denials and `allowed` / `denied` show it. ' +
      'At the per-key limit a full run warms up with one pass over every key (at most 90 s), so the timed part ' +
      'meets each key again at its limit (a quick run does not: there the limit rarely bites), if the pass took ' +
      "less than the key's 10 s: rate-limiter-flexible's takes 30–70 s (each key it blocks in process, past 999, " +
      'walks every key blocked), so its timed part meets every key refilled and denies none; the headline says so ' +
      'beside the ratio. ' +
      'The ceiling rows (10⁹, never denies) time the admitting path alone: the most a limiter can do, not what it ' +
      'does at its limit. rate-limiter-flexible gets the same rate in fixed windows of at least 1 s (`rate` points ' +
      'per 1 s; one point per 10 s for the per-key limit).',
    '**Scenarios**: `1 hot key` is one key for every call; `100k keys` takes 100,000 keys in turn. A row without ' +
      '"in flight" runs one decision at a time; `64 in flight` runs 64 loops at once on one connection. Every loop ' +
      `yields to the event loop every ${DECISIONS_PER_YIELD} decisions, as a server does between requests. Each row: a ` +
      `fresh limiter and connection, ${s.warmupMs} ms of warm-up, then at most ${count(s.measureMs)} ms or ` +
      `${count(s.maxDecisions)} decisions. Store timeout ${THROUGHPUT_TIMEOUT_MS} ms, failure policy \`open\`. ` +
      (s.quick
        ? ''
        : `\`100k keys\` rows run in steady state: ${count(STEADY_WARMUP_MS)} ms of warm-up at least (longer than ` +
          `the longest sync period), then ${count(STEADY_MEASURE_MS)} ms, as the many-keys section's rows.`),
    '**Latency**: a decision that awaited a promise is timed alone (its wait for the other loops is in it); ' +
      'decisions answered synchronously are timed together between two yields, each counted at their mean. ' +
      '`decisions/s` is decisions over wall time, yields included: the `baseline · no limiter` rows are the loop alone.',
    '**Redis RT / 1,000**: round trips per 1,000 decisions, counted by Redis itself: the change in ' +
      '`INFO commandstats` over the timed loop of script calls (EVALSHA, EVAL) and transactions (EXEC). Commands a ' +
      'script runs inside (`TIME`, `HMGET`, …) are no round trips; `latest.json` lists every command per row, and ' +
      "the server µs per decision. Counted on the whole server: on a shared `REDIS_URL`, other clients' calls count too.",
    '**× peer**: decisions/s over the `RateLimiterRedis` row of the same scenario and limit. It has an insurance ' +
      '`RateLimiterMemory` and `inMemoryBlockOnConsumed` set to its points, as its documentation advises; ' +
      '`RequestLimiter` has its counterpart, `rememberDenials`, on (a key turned away costs no Redis call until ' +
      'a token could pass).',
    '**awaited**: share of decisions that awaited a promise; the rest were answered synchronously (the two-tier ' +
      'limiter from its lease, or from a known-empty lease). `RedisStore.take` is one EVALSHA of the take script ' +
      'through the store, with no limiter around it: the bare cost of a Redis decision.',
    POLICY_NOTE,
  ],
};
