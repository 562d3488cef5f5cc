import { optimisticBound, tokenBucketBound } from '@tiered-limiter/test-harness';
import { columns, decisionWords } from './columns.js';
import { count, duration, small } from './format.js';
import { loopCell, POLICY_NOTE } from './health.js';
import { type KeySet, MANY_KEYS, ZIPF_CHECKED_KEYS } from './key-sets.js';
import { localLimiter, requestLimiter, rlfRedis, THROUGHPUT_TIMEOUT_MS, tieredLimiter } from './limiters.js';
import { type BenchLimit, BITES_10, peerLimitOf } from './limits.js';
import type { BenchSettings, Column, Section } from './section.js';
import { measureThroughput, STEADY_MEASURE_MS, STEADY_WARMUP_MS, throughputColumns } from './throughput.js';
import { PEER, relateToPeers, type ThroughputRow, type ThroughputTask, taskName } from './throughput-row.js';
import { type SlackedBound, windowCell } from './windows.js';

/** The limit of issue 11's many-keys rows: a burst of 100, then 10 per second, per key. */
const LIMIT: BenchLimit = BITES_10;
/**
 * The fleet size the two-tier limiters are told: the truth, since every row runs in one process,
 * which is the whole fleet (and within the optimistic rule). A declared count is a floor under the
 * live one, so a lone process told 4 shares each key's room with three instances that do not
 * exist: its leases are capped at a quarter of the capacity plus a period's refill, and a key asked
 * more often than that waits on refills (`OVER_DECLARED`'s row shows what that costs).
 */
export const DECLARED_INSTANCES = 1;
/** What the rows told the two-tier limiter until the ninth run: one row keeps it, beside the truth. */
export const OVER_DECLARED = 4;
/** Optimistic cold start: one token per key on credit, at most once a second per key. */
export const OPTIMISTIC = { mode: 'optimistic', credit: 1, spacingMs: 1000 } as const;
const IN_FLIGHT = [64, 256] as const;
const SHAPES: readonly KeySet[] = ['zipf', 'many'];

const { capacity, refillPerSecond } = LIMIT.spec;
/**
 * `C + r·(W + T)`: `T`, what a lease may borrow, is the sync period the limiter reported, which
 * `measureOn` adds to the stamps' slack. It is no constant: `instances × calls ÷ (0.9 × 200/s)`,
 * 22 ms for the declared 4 while a round is one call, up to 5 s as the keys a round weighs grow
 * (a call per 32: 160 keys make 5 calls and a period of 111 ms).
 */
const exactBound: SlackedBound = (extraMs) => tokenBucketBound(capacity, refillPerSecond, extraMs);
/**
 * Every row runs in one process: one instance starts keys on credit, so the optimistic term is
 * that one instance's, `1 · credit · (1 + ⌊W / spacing⌋)`.
 */
const optimisticTerms = { instances: 1, credit: OPTIMISTIC.credit, spacingMs: OPTIMISTIC.spacingMs };
const optimisticSlacked: SlackedBound = (extraMs) =>
  optimisticBound(capacity, refillPerSecond, optimisticTerms, extraMs);

const CHECKED = Array.from({ length: ZIPF_CHECKED_KEYS }, (_, i) => `user:${i}`);
const exactCheck = { keys: CHECKED, bound: exactBound };
/** The per-request limiter borrows nothing (it has no sync period): one bucket's `C + r·W`. */
const requestCheck = { keys: CHECKED, bound: exactBound };

/** The many-keys rows' limiters, each as those rows set it up (the fixed-load rows use the same). */
export const MANY_KEYS_LIMITERS: readonly [string, ThroughputTask['make']][] = [
  [
    'TieredLimiter',
    (redis, prefix) =>
      tieredLimiter(redis, prefix, LIMIT.spec, { maxKeys: MANY_KEYS, instances: DECLARED_INSTANCES }),
  ],
  [
    'TieredLimiter (optimistic)',
    (redis, prefix) =>
      tieredLimiter(redis, prefix, LIMIT.spec, {
        maxKeys: MANY_KEYS,
        instances: DECLARED_INSTANCES,
        coldStart: OPTIMISTIC,
      }),
  ],
  ['RequestLimiter', (redis, prefix) => requestLimiter(redis, prefix, LIMIT.spec)],
  [PEER, (redis, prefix) => rlfRedis(redis, prefix, peerLimitOf(LIMIT.spec))],
];

/** The exact two-tier limiter told more instances than run: its one row, keys in turn at 64 in flight. */
const TOLD_MORE = `TieredLimiter (told ${OVER_DECLARED} instances)`;
const toldMore: ThroughputTask['make'] = (redis, prefix) =>
  tieredLimiter(redis, prefix, LIMIT.spec, { maxKeys: MANY_KEYS, instances: OVER_DECLARED });

/**
 * The rows' ceiling: `LocalLimiter` alone, each key's bucket in process and nothing shared. Not a
 * limiter for a fleet; it says how fast any limiter holding its keys' state in process can be on
 * these keys in this loop, on this host, so that the two-tier rows' ratios are read against it.
 */
export const IN_PROCESS_ONLY = 'LocalLimiter (in process, not shared)';
const inProcessOnly: ThroughputTask['make'] = () => localLimiter(LIMIT.spec, MANY_KEYS);

/** The bound each limiter's hottest keys are checked against (the peer's are not). */
const CHECKS: Readonly<Record<string, ThroughputTask['checked']>> = {
  TieredLimiter: exactCheck,
  [TOLD_MORE]: exactCheck,
  // One process's own buckets: one bucket's `C + r·W`, as for the per-request limiter.
  [IN_PROCESS_ONLY]: exactCheck,
  'TieredLimiter (optimistic)': { keys: CHECKED, bound: optimisticSlacked, pieceMs: OPTIMISTIC.spacingMs },
  RequestLimiter: requestCheck,
};

export function keysTasks(): ThroughputTask[] {
  return SHAPES.flatMap((keys) =>
    IN_FLIGHT.flatMap((inFlight) =>
      limitersOf(keys, inFlight).map(([limiter, make]) => ({
        name: taskName(limiter, keys, LIMIT, inFlight),
        limiter,
        keys,
        limit: LIMIT,
        inFlight,
        peer: taskName(PEER, keys, LIMIT, inFlight),
        make,
        steady: true,
        ...(CHECKS[limiter] === undefined ? {} : { checked: CHECKS[limiter] }),
      })),
    ),
  );
}

/**
 * A shape's limiters at `inFlight`: `MANY_KEYS_LIMITERS`, and keys in turn at 64 the one told more
 * instances; then the in-process ceiling, last so that the peer's row comes before it.
 */
function limitersOf(keys: KeySet, inFlight: number): readonly [string, ThroughputTask['make']][] {
  const ceiling: [string, ThroughputTask['make']] = [IN_PROCESS_ONLY, inProcessOnly];
  if (keys !== 'many' || inFlight !== IN_FLIGHT[0]) return [...MANY_KEYS_LIMITERS, ceiling];
  return [MANY_KEYS_LIMITERS[0]!, [TOLD_MORE, toldMore], ...MANY_KEYS_LIMITERS.slice(1), ceiling];
}

const GROUPS: Readonly<Record<string, string>> = {
  zipf: "100,000 keys drawn by Zipf's law (s = 1): the hottest keys at their limit, most keys seldom seen",
  many:
    '100,000 keys taken in turn: each comes back every 100,000 decisions, so its limit (10 a second beside a ' +
    'burst of 100) can bite only above 1 M decisions a second',
};

const COLUMNS: readonly Column<ThroughputRow>[] = [
  throughputColumns.rate,
  ...columns.decisions<ThroughputRow>(),
  ...columns.latency<ThroughputRow>(),
  columns.roundTrips<ThroughputRow>(),
  throughputColumns.redisUs,
  throughputColumns.redisCpu,
  throughputColumns.keyOps,
  throughputColumns.timesPeer,
  throughputColumns.awaited,
  { title: 'worst window (10 hottest keys)', cell: (r) => windowCell(r.window) },
  columns.loop<ThroughputRow>(),
  columns.probe<ThroughputRow>(),
];

export const keysSection: Section<ThroughputTask, ThroughputRow> = {
  id: 'keys',
  title: `Many keys: 100,000 keys at ${LIMIT.short} (capacity 100, 10 per second) each, 64 and 256 in flight`,
  usesRedis: true,
  tasks: () => keysTasks(),
  measure: measureThroughput,
  progress: (row) =>
    `${row.name}: ${count(row.opsPerSecond)} decisions/s (${decisionWords(row)}), p99 ${duration(row.p99Ns)}, ` +
    `${small(row.roundTripsPer1000)} Redis RT per 1,000, ${small(row.redisUsPerDecision)} Redis µs per decision, ` +
    `${row.keyOpsPerCall === null ? '—' : small(row.keyOpsPerCall)} key-ops per call, loop ${loopCell(row.health)}`,
  columns: COLUMNS,
  group: (row) => GROUPS[row.keySet] ?? row.keySet,
  finish: relateToPeers,
  notes: (s: BenchSettings) => [
    "**Keys**: `100k keys Zipf` draws each request's key from 100,000 by Zipf's law (s = 1; a fixed sequence of " +
      '2²⁰ draws, the same for every row): the hottest key gets 8 % of the requests and denials, the hottest 400 ' +
      'half of them, and most keys are seen once in a long while (sparse). `100k keys` takes them in turn, as ' +
      'issue 11 measured: each key comes back every 100,000 decisions, 10 times a second at 1 M decisions a second, ' +
      'so its limit can bite only for a limiter that fast (the peer, near 120 k a second, meets a key about once a ' +
      'second and is never denied: `denied` shows which); in steady state no key is cold. ' +
      (s.quick
        ? `A quick run: a fresh limiter, ${s.warmupMs} ms of warm-up, then ${count(s.measureMs)} ms.`
        : `**Steady state**: each row is a fresh limiter warmed up for ${count(STEADY_WARMUP_MS)} ms (one pass over ` +
          'every key at least), three times the longest sync period (5 s), then timed over ' +
          `${count(STEADY_MEASURE_MS)} ms, a whole sync round: a long-running service meets its keys so, each ` +
          'with its first take, first lease, and syncs enough for its rate estimate to reach the traffic. The first decisions on a key are the cold-key ' +
          'rows. Every limiter gets the same warm-up; the peer has no state to warm.'),
    `**Limiters**: \`TieredLimiter\` with its defaults (the periodic sync, exact cold start), told \`instances: ${DECLARED_INSTANCES}\` ` +
      '(the process is the whole fleet; the declared count is a floor under the live one); ' +
      `\`${TOLD_MORE}\`, keys in turn at 64 in flight only, is the same limiter told \`instances: ${OVER_DECLARED}\`, ` +
      'as the rows were until the ninth run: each lease capped at a share for instances that do not run; ' +
      `\`(optimistic)\` adds \`coldStart: { mode: 'optimistic', credit: ${OPTIMISTIC.credit}, spacingMs: ${OPTIMISTIC.spacingMs} }\`; ` +
      `\`RequestLimiter\`; store timeout ${THROUGHPUT_TIMEOUT_MS} ms, \`failurePolicy: open\`. The peer is ` +
      "rate-limiter-flexible's `RateLimiterRedis`, 10 points per 1 s, with its in-memory block and insurance limiter. " +
      `\`${IN_PROCESS_ONLY}\` is no limiter for a fleet but the rows' ceiling: \`LocalLimiter\` alone, each key's bucket ` +
      'in process and nothing shared, no Redis, in the same loop on the same keys. No limiter that keeps its keys in ' +
      'process decides faster than it here, whatever it shares; the two-tier rows read against it say what sharing ' +
      "the limit costs, and the peer's ratio beside it what this host allows.",
    '**Redis RT / 1,000** and **Redis µs / decision**: script calls (EVALSHA, EVAL, EXEC) per 1,000 decisions and ' +
      'their server time per decision, from `INFO commandstats` over the timed part. **key-ops / call**: keys ' +
      "per round trip by the limiter's own `RedisStore.stats()` (`keys ÷ calls`): how much each call carries, a " +
      "sync round's heartbeat (one key, the fleet's set) among them. " +
      "**Redis CPU µs / decision**: all the server's CPU over the timed part (`INFO cpu`, user and system), per " +
      'decision: its commands, and reading requests, writing replies and expiring keys, which command time leaves ' +
      'out; what a decision costs every other user of the server (the probe adds about 100 PINGs a second).',
    '**Worst window**: admissions of the 10 hottest keys (`user:0` … `user:9`), stamped when each decision is known, ' +
      'against the bound of the mode: `C + r·W` for the per-request limiter, `C + r·(W + T)` for the two-tier one ' +
      '(`T` the longest sync period the limiter reported in the row, `stats().syncPeriodMs`, read every 250 ms: ' +
      '22 ms for the 4 instances it is told of while a round is one call, up to 5 s as the keys a round weighs grow; ' +
      '`latest.json`: `syncPeriodMs`), plus `1 · credit · (1 + ⌊W / spacingMs⌋)` ' +
      'for the optimistic one (one process, so one instance admits on credit); each window allows the longest wait ' +
      'of the row more refill, for stamps taken after the store decided.',
    POLICY_NOTE,
  ],
};
