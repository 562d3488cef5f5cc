import { setTimeout as sleep, setImmediate as yieldToLoop } from 'node:timers/promises';
import { commandDelta } from '@tiered-limiter/test-harness';
import { type Accounted, columns, decisionWords } from './columns.js';
import { count, duration, small, times } from './format.js';
import { loopCell, POLICY_NOTE, watchHealth } from './health.js';
import { DECLARED_INSTANCES, OPTIMISTIC } from './keys.js';
import {
  requestLimiter,
  rlfRedis,
  type SubjectFactory,
  THROUGHPUT_TIMEOUT_MS,
  tieredLimiter,
} from './limiters.js';
import { BITES_10, peerLimitOf } from './limits.js';
import { newHistogram } from './loop.js';
import type { BenchSettings, Column, RunContext, Section } from './section.js';

const LIMIT = BITES_10.spec;
const PEER = 'RateLimiterRedis · cold key';

export interface ColdTask {
  readonly name: string;
  readonly limiter: string;
  readonly peer: string;
  readonly make: SubjectFactory;
  /**
   * How long after it is made the limiter starts giving credit (optimistic cold start's spacing):
   * the timed keys wait for it, as a service's requests meet a limiter that has been running.
   */
  readonly creditAfterMs?: number;
}

/** First decisions on keys the limiter had never seen, one at a time. Latencies in ns. */
export interface ColdRow extends Accounted {
  readonly name: string;
  readonly limiter: string;
  readonly peer: string;
  readonly p50Ns: number;
  readonly p99Ns: number;
  readonly p999Ns: number;
  readonly maxNs: number;
  /** First decisions answered with no promise (`tryConsume`). */
  readonly synchronous: number;
  readonly roundTrips: number;
  readonly roundTripsPer1000: number;
  /** The peer's p50 over this row's. */
  timesPeerP50: number | null;
}

const setup = { maxKeys: 1_000_000, instances: DECLARED_INSTANCES };

export function coldTasks(): ColdTask[] {
  const task = (limiter: string, make: ColdTask['make'], creditAfterMs?: number): ColdTask => ({
    name: `${limiter} · cold key`,
    limiter,
    peer: PEER,
    make,
    ...(creditAfterMs === undefined ? {} : { creditAfterMs }),
  });
  return [
    task('TieredLimiter', (redis, prefix) => tieredLimiter(redis, prefix, LIMIT, setup)),
    task(
      'TieredLimiter (optimistic)',
      (redis, prefix) => tieredLimiter(redis, prefix, LIMIT, { ...setup, coldStart: OPTIMISTIC }),
      OPTIMISTIC.spacingMs,
    ),
    task('RequestLimiter', (redis, prefix) => requestLimiter(redis, prefix, LIMIT)),
    task('RateLimiterRedis', (redis, prefix) => rlfRedis(redis, prefix, peerLimitOf(LIMIT))),
  ];
}

/** Cold keys per row, timed after the warm-up. */
const coldKeys = (s: BenchSettings) => (s.quick ? 300 : 3000);
/**
 * Cold keys of warm-up per row (connection, JIT), untimed. Each row's limiter is the first in its
 * process (in a quick run, the first of its section's), and with 200 the JIT's warm-up was in the
 * figure: in a fresh process a two-tier limiter read a p50 of 430 µs over its first 500 cold keys
 * and about 110 µs by its 3,000th, `RequestLimiter` 332 µs and 75 µs. The two-tier limiter, with
 * more code on its path, paid most: its row read 154–286 µs against 86–97 µs with 3,000.
 */
const warmupKeys = (s: BenchSettings) => (s.quick ? 200 : 3000);

/**
 * One decision on each of `coldKeys` keys never seen before, one at a time, yielding to the event
 * loop between them (as a server does between requests): the latency of a key's first request.
 */
export async function measureCold(task: ColdTask, context: RunContext): Promise<ColdRow> {
  const { target, settings } = context;
  if (target === undefined) throw new Error('cold-key rows need Redis');
  const client = await target.client();
  const subject = task.make(client, context.prefix);
  const madeAt = performance.now();
  const { sync, async } = subject.decider;
  const histogram = newHistogram();
  const tally = [0, 0, 0, 0];
  let synchronous = 0;
  try {
    const decide = async (key: string, timed: boolean) => {
      const started = performance.now();
      let outcome = sync?.(key);
      const fast = outcome !== undefined;
      outcome ??= await async(key);
      if (!timed) return;
      histogram.recordValue(Math.max(1, Math.round((performance.now() - started) * 1e6)));
      tally[outcome]!++;
      if (fast) synchronous++;
    };
    for (let i = 0, warm = warmupKeys(settings); i < warm; i++) {
      await decide(`warm:${i}`, false);
      await yieldToLoop();
    }
    // A margin for the heartbeat whose answer starts the spacing.
    const creditIn = (task.creditAfterMs ?? 0) + 100 - (performance.now() - madeAt);
    if (task.creditAfterMs !== undefined && creditIn > 0) await sleep(creditIn);
    const before = await target.commandStats();
    const watch = watchHealth(target.probe);
    const n = coldKeys(settings);
    for (let i = 0; i < n; i++) {
      await decide(`cold:${i}`, true);
      await yieldToLoop();
    }
    const health = await watch.stop();
    const redis = commandDelta(before, await target.commandStats());
    return {
      name: task.name,
      limiter: task.limiter,
      peer: task.peer,
      decisions: n,
      allowed: tally[1]!,
      denied: tally[0]!,
      policy: subject.showsPolicy ? { allowed: tally[3]!, denied: tally[2]! } : null,
      health,
      p50Ns: histogram.getValueAtPercentile(50),
      p99Ns: histogram.getValueAtPercentile(99),
      p999Ns: histogram.getValueAtPercentile(99.9),
      maxNs: histogram.maxValue,
      synchronous,
      roundTrips: redis.roundTrips,
      roundTripsPer1000: (1000 * redis.roundTrips) / n,
      timesPeerP50: null,
    };
  } finally {
    await subject.close();
    client.disconnect();
  }
}

function relateColdToPeer(rows: ColdRow[]): void {
  const peer = rows.find((r) => r.name === PEER);
  for (const row of rows) row.timesPeerP50 = peer === undefined ? null : peer.p50Ns / row.p50Ns;
}

const COLUMNS: readonly Column<ColdRow>[] = [
  { title: 'first decisions', cell: (r) => count(r.decisions) },
  ...columns.decisions<ColdRow>(),
  ...columns.latency<ColdRow>(),
  { title: 'max', cell: (r) => duration(r.maxNs) },
  { title: 'answered in process', cell: (r) => count(r.synchronous) },
  columns.roundTrips<ColdRow>(),
  { title: 'p50 × faster than peer', cell: (r) => (r.timesPeerP50 === null ? '—' : times(r.timesPeerP50)) },
  columns.loop<ColdRow>(),
  columns.probe<ColdRow>(),
];

export const coldSection: Section<ColdTask, ColdRow> = {
  id: 'cold',
  title: 'Cold keys: the first decision on a key never seen before',
  usesRedis: true,
  tasks: coldTasks,
  measure: measureCold,
  progress: (row) =>
    `${row.name}: first decision p50 ${duration(row.p50Ns)}, p99 ${duration(row.p99Ns)} (${decisionWords(row)}), ` +
    `${small(row.roundTripsPer1000)} Redis RT per 1,000, loop ${loopCell(row.health)}`,
  columns: COLUMNS,
  finish: relateColdToPeer,
  notes: (s: BenchSettings) => [
    `Each row: a fresh limiter (capacity 100, 10 per second per key; two-tier limiters told \`instances: ${DECLARED_INSTANCES}\`, ` +
      `store timeout ${THROUGHPUT_TIMEOUT_MS} ms), ${count(warmupKeys(s))} keys of warm-up (so that a row times warm code, not the JIT), then one decision on each of ` +
      `${count(coldKeys(s))} keys never seen before, one at a time, yielding to the event loop between them. A decision ` +
      'is timed from the call to the answer (`tryConsume(key) ?? await consume(key)` for the two-tier limiter). ' +
      '`(optimistic)` admits a cold key on credit in process and charges the store in the same tick ' +
      `(\`coldStart: { mode: 'optimistic', credit: ${OPTIMISTIC.credit}, spacingMs: ${OPTIMISTIC.spacingMs} }\`; the timed keys ` +
      'start once it has run a spacing, as an instance gives credit only a spacing into its life); exact ' +
      'asks the store (one coalesced take). **answered in process**: first decisions made with no promise.',
    POLICY_NOTE,
  ],
};
