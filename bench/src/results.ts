import { readFileSync } from 'node:fs';
import { cpus, platform, release, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { AccuracyRow } from './accuracy.js';
import type { FleetRow } from './fleet-sim.js';
import { count, duration, markdownTable, percent, small, textTable, times } from './format.js';
import type { ThroughputRow } from './throughput.js';

/** Everything one run measured, as written to `latest.json`. */
export interface BenchResults {
  readonly generatedAt: string;
  readonly quick: boolean;
  readonly filter: string | null;
  readonly machine: Machine;
  readonly versions: Readonly<Record<string, string>>;
  readonly redis: { readonly version: string; readonly source: string; readonly description: string };
  readonly settings: BenchSettings;
  readonly throughput: readonly ThroughputRow[];
  readonly accuracy: readonly AccuracyRow[];
  readonly fleet: readonly FleetRow[];
}

/** How long and how hard each part ran. */
export interface BenchSettings {
  readonly warmupMs: number;
  readonly measureMs: number;
  readonly maxDecisions: number;
  readonly accuracyMs: number;
  readonly processes: number;
  readonly fleetWarmupMs: number;
  readonly fleetMs: number;
  readonly fleetKeys: number;
  readonly fleetRate: number;
}

export interface Machine {
  readonly cpus: number;
  readonly cpuModel: string;
  readonly platform: string;
  readonly memoryGb: number;
  readonly node: string;
}

const BENCH_DIR = fileURLToPath(new URL('..', import.meta.url));
const PACKAGES = [
  '@tiered-limiter/core',
  '@tiered-limiter/local',
  '@tiered-limiter/redis',
  'ioredis',
  'rate-limiter-flexible',
  'hdr-histogram-js',
];

export function machine(): Machine {
  const all = cpus();
  return {
    cpus: all.length,
    cpuModel: all[0]?.model.trim() ?? 'unknown',
    platform: `${platform()} ${release()}`,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
  };
}

/** Versions of the libraries measured, read from the packages the bench loads. */
export function versions(): Record<string, string> {
  const found: Record<string, string> = {};
  for (const name of PACKAGES) {
    try {
      const pkg = JSON.parse(readFileSync(`${BENCH_DIR}node_modules/${name}/package.json`, 'utf8'));
      found[name] = String(pkg.version);
    } catch {
      found[name] = 'unknown';
    }
  }
  return found;
}

const THROUGHPUT_HEADER = [
  'task',
  'ops/s',
  'p50',
  'p99',
  'p99.9',
  'Redis RT / 1,000',
  '× peer',
  'awaited',
  'admitted',
];
const ACCURACY_HEADER = [
  'task',
  'decisions',
  'admitted',
  'ideal',
  'of ideal',
  'Redis RT / 1,000',
  'busiest window',
  'most in 1 s',
];
const FLEET_HEADER = [
  'task',
  'decisions/s',
  'Redis calls/s',
  'Redis RT / 1,000',
  'p50',
  'p99',
  'admitted',
  'skipped',
];

/** Share of decisions that awaited a promise: 100 %, 0.1 %, 0. */
function awaited(share: number): string {
  if (share === 0) return '0';
  if (share >= 0.995) return percent(share, 0);
  return share >= 0.001 ? percent(share, 1) : percent(share, 3);
}

function throughputLines(rows: readonly ThroughputRow[]): string[][] {
  return rows.map((r) => [
    r.name,
    count(r.opsPerSecond),
    duration(r.p50Ns),
    duration(r.p99Ns),
    duration(r.p999Ns),
    r.roundTripsPer1000 === null ? '—' : small(r.roundTripsPer1000),
    r.timesPeer === null ? '—' : times(r.timesPeer),
    awaited(r.awaitedShare),
    percent(r.admittedShare, 0),
  ]);
}

function windowText(row: AccuracyRow): [string, string] {
  const w = row.window;
  if (w === null) return ['—', '—'];
  return [
    `${count(w.admitted)} in ${count(w.windowMs)} ms (bound ${count(Math.floor(w.bound))})`,
    `${count(w.maxIn1s)} (bound ${count(Math.floor(w.boundFor1s))})`,
  ];
}

function accuracyLines(rows: readonly AccuracyRow[]): string[][] {
  return rows.map((r) => [
    r.name,
    count(r.decisions),
    count(r.admitted),
    count(r.ideal),
    percent(r.admittedOfIdeal),
    small(r.roundTripsPer1000),
    ...windowText(r),
  ]);
}

function fleetLines(rows: readonly FleetRow[]): string[][] {
  return rows.map((r) => [
    r.name,
    count((r.decisions * 1000) / r.measuredMs),
    count(r.redisCallsPerSecond),
    small(r.roundTripsPer1000),
    duration(r.p50Ns),
    duration(r.p99Ns),
    percent(r.admittedShare, 0),
    count(r.skipped),
  ]);
}

export function machineLine(results: BenchResults): string {
  const m = results.machine;
  const v = results.versions;
  return (
    `${m.cpus} × ${m.cpuModel}, ${m.memoryGb} GB, ${m.platform}; Node ${m.node}; Redis ${results.redis.version}; ` +
    `tiered-limiter ${v['@tiered-limiter/redis']}, ioredis ${v.ioredis}, rate-limiter-flexible ${v['rate-limiter-flexible']}`
  );
}

/** The tables for the terminal. */
export function terminalReport(results: BenchResults): string {
  const parts = [`${results.quick ? 'Quick' : 'Full'} run · ${machineLine(results)}`];
  if (results.throughput.length > 0) {
    parts.push('', 'Throughput (limit never reached: every row times the admitting path)');
    parts.push(textTable(THROUGHPUT_HEADER, throughputLines(results.throughput)));
  }
  if (results.accuracy.length > 0) {
    parts.push('', 'Accuracy: processes sharing one key at capacity 100, 200/s');
    parts.push(textTable(ACCURACY_HEADER, accuracyLines(results.accuracy)));
  }
  if (results.fleet.length > 0) {
    parts.push('', 'Fleet simulation: 10 hot keys, 10,000 requests/s in total');
    parts.push(textTable(FLEET_HEADER, fleetLines(results.fleet)));
  }
  return parts.join('\n');
}

/** `latest.md`. */
export function markdownReport(results: BenchResults, chartFile: string | undefined): string {
  const s = results.settings;
  const parts = [
    '# `pnpm bench` results',
    '',
    `${results.quick ? 'A quick run (`--quick`): short, rough numbers.' : 'One full run of `pnpm bench`.'} ` +
      `${results.generatedAt}. ${machineLine(results)}. Redis: ${results.redis.description}.`,
    '',
    'Absolute numbers move with the machine; read the ratios, which come from one run on one Redis.',
  ];
  if (chartFile)
    parts.push(
      '',
      `![Redis round trips per 1,000 decisions, accuracy, and the fleet simulation](${chartFile})`,
    );
  if (results.throughput.length > 0) {
    parts.push(
      '',
      '## Throughput and latency',
      '',
      markdownTable(THROUGHPUT_HEADER, throughputLines(results.throughput)),
      '',
      `- **Limit**: capacity 10⁹, refilled 10⁹ per second (rate-limiter-flexible: 10⁹ points per 1 s window), so every ` +
        'call is admitted (the `admitted` column) and each row times the admitting path, the one a healthy service runs most.',
      '- **Scenarios**: `1 hot key` is one key for every call; `100k keys` takes 100,000 keys in turn. A row without ' +
        '"in flight" runs one decision at a time; `64 in flight` runs 64 loops at once on one connection. Every loop ' +
        `yields to the event loop every 128 decisions, as a server does between requests. Each row: a fresh limiter ` +
        `and connection, ${s.warmupMs} ms of warm-up, then at most ${s.measureMs} ms or ${count(s.maxDecisions)} decisions.`,
      '- **Latency**: a decision that awaited a promise is timed alone (so its wait for the other loops is in it); ' +
        'decisions answered synchronously are timed together between two yields, each counted at their mean: a clock ' +
        'read costs more than a lease decision. `ops/s` is decisions over wall time, yields included: the ' +
        '`baseline · no limiter` row is that loop alone.',
      '- **Redis RT / 1,000**: round trips per 1,000 decisions, counted by Redis itself: the change in ' +
        '`INFO commandstats` over the timed loop of script calls (EVALSHA, EVAL) and transactions (EXEC). Every ' +
        'limiter here, the peer included, decides with one Lua script per call. Redis also counts each command a ' +
        "script runs inside (`TIME`, `HMGET`, `HSET`, `PEXPIRE`; the peer's `SET`, `INCRBY`, `PTTL`), which are no " +
        'round trips; `latest.json` lists every command per row. Counted on the whole server: on a shared ' +
        "`REDIS_URL`, other clients' scripts count too.",
      '- **× peer**: ops/s over the rate-limiter-flexible row of the same scenario (`RateLimiterRedis` for the Redis ' +
        'rows, `RateLimiterMemory` for the in-process ones). `RateLimiterRedis` has an insurance `RateLimiterMemory` ' +
        'for the same limit and `inMemoryBlockOnConsumed` set to its points, as its documentation advises.',
      '- **awaited**: share of decisions that awaited a promise; the rest were answered synchronously (the two-tier ' +
        'limiter from its lease).',
      '- `RedisStore.take` is one EVALSHA of the take script through the store, with no limiter around it: the bare ' +
        'cost of a Redis decision, against which the `RequestLimiter` rows are read.',
    );
  }
  if (results.accuracy.length > 0) {
    parts.push(
      '',
      '## Accuracy under a fleet',
      '',
      markdownTable(ACCURACY_HEADER, accuracyLines(results.accuracy)),
      '',
      `- Each process has its own connection and limiter, from the built packages, and hammers one key ` +
        `(one decision at a time, yielding every 128) for ${count(s.accuracyMs)} ms, all starting together. ` +
        'The limit: capacity 100, 200 per second, `failurePolicy: closed`, `instances` = the process count.',
      '- **Ideal** for the token bucket: capacity + rate × duration. rate-limiter-flexible has no token bucket: ' +
        'its nearest limit is 200 points per 1 s fixed window, whose ideal is 200 per window begun in the run.',
      '- **Busiest window**: the window between two admissions that came closest to its bound (a worse one would ' +
        "be over it). For `TieredLimiter` the bound is the README's `capacity + rate × (W + leaseTtlMs)` with " +
        '`leaseTtlMs` 1000; for `RequestLimiter` the global bucket alone, `capacity + rate × W`. Admissions are ' +
        "stamped with `Date.now()` in each process; each window's bound allows 20 ms more for the stamps' lag.",
    );
    for (const row of results.accuracy) parts.push(`- ${row.limiter}: ideal = ${row.idealRule}.`);
  }
  if (results.fleet.length > 0) {
    parts.push(
      '',
      '## Fleet simulation: Redis traffic as the fleet grows',
      '',
      markdownTable(FLEET_HEADER, fleetLines(results.fleet)),
      '',
      `- Simulated app servers in one process, each with its own ioredis connection and its own limiter (told ` +
        `\`instances\` = the fleet size), share ${s.fleetKeys} hot keys, each limited to 2,000 per second (capacity ` +
        `2,000). Requests arrive at ${count(s.fleetRate)} per second in total whatever the fleet size, paced on a 1 ms ` +
        'tick, each to a random server and key, as a load balancer spreads them; at most 5,000 wait on Redis (more ' +
        `would be skipped and counted). ${count(s.fleetWarmupMs)} ms of warm-up, then ${count(s.fleetMs)} ms counted.`,
      "- **Redis calls/s** is what the hot keys' shard serves: script calls (EVALSHA) from `INFO commandstats` over " +
        "the counted time. The two-tier limiter's are lease refills, and refunds of leases that expired unspent.",
    );
    for (const row of results.fleet) {
      if (row.refills + row.refunds === 0) continue;
      const seconds = row.measuredMs / 1000;
      parts.push(
        `- ${row.name}: ${count(row.refills / seconds)} refills and ${count(row.refunds / seconds)} refunds per second ` +
          "(the limiters' own counts).",
      );
    }
  }
  return `${parts.join('\n')}\n`;
}
