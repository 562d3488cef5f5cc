import { recommendedClusterOptions } from '@tiered-limiter/redis';
import {
  readCommandStats,
  readServerCpuSeconds,
  startCluster,
  whenReady,
} from '@tiered-limiter/test-harness';
import { columns } from './columns.js';
import { count, small, times } from './format.js';
import { POLICY_NOTE } from './health.js';
import { MANY_KEYS } from './key-sets.js';
import { DECLARED_INSTANCES } from './keys.js';
import { requestLimiter, rlfRedis, tieredLimiter } from './limiters.js';
import { BITES_10, peerLimitOf } from './limits.js';
import type { BenchSettings, Column, RunContext, Section } from './section.js';
import {
  measureOn,
  measureThroughput,
  STEADY_MEASURE_MS,
  STEADY_WARMUP_MS,
  throughputColumns,
  throughputProgress,
} from './throughput.js';
import { PEER, relateToPeers, type ThroughputRow, type ThroughputTask, taskName } from './throughput-row.js';

const LIMIT = BITES_10;
const IN_FLIGHT = 256;
const MASTERS = 3;

type Topology = 'standalone' | 'cluster';
const TOPOLOGY_LABEL: Readonly<Record<Topology, string>> = {
  standalone: '1 master',
  cluster: `${MASTERS}-master Cluster`,
};

export interface ClusterTask extends ThroughputTask {
  readonly topology: Topology;
  /** The same limiter on one server: the row this one's speed-up is read against. */
  readonly oneMaster: string;
}

export interface ClusterRow extends ThroughputRow {
  readonly topology: Topology;
  readonly oneMaster: string;
  /** decisions/s over the same limiter's on one server. */
  timesOneMaster: number | null;
}

/** Virtual shards of the sharded row: four per master, as the README advises for many keys. */
const SHARDS = 12;
const SHARDED = `TieredLimiter (shards ${SHARDS})`;

const LIMITERS: readonly [string, ThroughputTask['make']][] = [
  [
    'TieredLimiter',
    (redis, prefix) =>
      tieredLimiter(redis, prefix, LIMIT.spec, { maxKeys: MANY_KEYS, instances: DECLARED_INSTANCES }),
  ],
  [
    SHARDED,
    (redis, prefix) =>
      tieredLimiter(redis, prefix, LIMIT.spec, {
        maxKeys: MANY_KEYS,
        instances: DECLARED_INSTANCES,
        shards: SHARDS,
      }),
  ],
  ['RequestLimiter', (redis, prefix) => requestLimiter(redis, prefix, LIMIT.spec)],
  [PEER, (redis, prefix) => rlfRedis(redis, prefix, peerLimitOf(LIMIT.spec))],
];

const nameOf = (limiter: string, topology: Topology) =>
  `${taskName(limiter, 'many', LIMIT, IN_FLIGHT)} · ${TOPOLOGY_LABEL[topology]}`;

export function clusterTasks(): ClusterTask[] {
  const topologies: readonly Topology[] = ['standalone', 'cluster'];
  return topologies.flatMap((topology) =>
    // On one server shards change nothing but the key names: the sharded row runs on the Cluster
    // alone, against the plain two-tier row on one server.
    LIMITERS.filter(([limiter]) => topology === 'cluster' || limiter !== SHARDED).map(([limiter, make]) => ({
      name: nameOf(limiter, topology),
      limiter,
      keys: 'many' as const,
      limit: LIMIT,
      inFlight: IN_FLIGHT,
      peer: nameOf(PEER, topology),
      make,
      steady: true,
      topology,
      oneMaster: nameOf(limiter === SHARDED ? 'TieredLimiter' : limiter, 'standalone'),
    })),
  );
}

/**
 * A row on one server is a throughput row on the run's Redis; a Cluster row starts its own
 * Cluster of `MASTERS` masters for itself (no replicas, loopback), counts commands summed over
 * the masters, and has no probe (the probe watches the run's server, not this Cluster).
 */
export async function measureCluster(task: ClusterTask, context: RunContext): Promise<ClusterRow> {
  const extra = { topology: task.topology, oneMaster: task.oneMaster, timesOneMaster: null };
  if (task.topology === 'standalone') return { ...(await measureThroughput(task, context)), ...extra };
  const cluster = await startCluster({ masters: MASTERS });
  try {
    const client = cluster.cluster(recommendedClusterOptions);
    await whenReady(client);
    const row = await measureOn(
      task,
      {
        client,
        commandStats: () => readCommandStats(client),
        serverCpuSeconds: () => readServerCpuSeconds(client),
        probe: undefined,
      },
      context.prefix,
      context.settings,
    );
    return { ...row, ...extra };
  } finally {
    await cluster.stop();
  }
}

function relate(rows: ClusterRow[]): void {
  relateToPeers(rows);
  const byName = new Map(rows.map((row) => [row.name, row]));
  for (const row of rows) {
    const one = byName.get(row.oneMaster);
    row.timesOneMaster = one === undefined ? null : row.opsPerSecond / one.opsPerSecond;
  }
}

const COLUMNS: readonly Column<ClusterRow>[] = [
  throughputColumns.rate,
  ...columns.decisions<ClusterRow>(),
  ...columns.latency<ClusterRow>(),
  { title: 'script calls / 1,000', cell: (r) => small(r.roundTripsPer1000) },
  {
    title: 'round trips / 1,000',
    cell: (r) => (r.storeCalls === null ? '—' : small((1000 * r.storeCalls) / r.decisions)),
  },
  throughputColumns.redisUs,
  throughputColumns.redisCpu,
  throughputColumns.keyOps,
  { title: '× 1 master', cell: (r) => (r.timesOneMaster === null ? '—' : times(r.timesOneMaster)) },
  throughputColumns.timesPeer,
  throughputColumns.awaited,
  columns.loop<ClusterRow>(),
];

export const clusterSection: Section<ClusterTask, ClusterRow> = {
  id: 'cluster',
  title: `Redis Cluster: 100,000 keys at ${LIMIT.short}, ${IN_FLIGHT} in flight, on ${MASTERS} masters and on 1`,
  usesRedis: true,
  tasks: () => clusterTasks(),
  measure: measureCluster,
  progress: throughputProgress,
  columns: COLUMNS,
  group: (row) => TOPOLOGY_LABEL[row.topology],
  finish: relate,
  notes: (s: BenchSettings) => [
    `100,000 keys taken in turn (each back every 100,000 decisions: warm in steady state, rarely denied), ${IN_FLIGHT} in ` +
      `flight, capacity 100 at 10 per second per key; limiters as in the many-keys rows. \`1 master\`: the run's ` +
      `Redis; \`${MASTERS}-master Cluster\`: a Cluster of ${MASTERS} \`redis-server\` processes on loopback (no ` +
      'replicas) started for the row, ioredis `Cluster` with `recommendedClusterOptions`. On a Cluster `RedisStore` ' +
      "sends a script call per slot, and a master's slots' calls as one pipeline: **script calls** (EVALSHA, by " +
      '`INFO commandstats` summed over the masters) and **round trips** (calls and pipelines, by `RedisStore.stats()`) ' +
      'differ there; **key-ops / call** is keys per round trip. Per-user keys spread over 16,384 slots, so a ' +
      `pipeline's script calls carry about one key each. ${s.quick ? 'A quick run warms up briefly.' : `A full run times each row in steady state, as the many-keys rows (${count(STEADY_WARMUP_MS)} ms of warm-up, ${count(STEADY_MEASURE_MS)} ms timed).`} ` +
      `\`${SHARDED}\` gives its \`RedisStore\` \`shards: ${SHARDS}\`, which puts many users in a few slots (README › ` +
      'Virtual shards), so a script call carries many keys; the other rows run without it. ' +
      'Every server shares the same 2 cores with the bench: a Cluster here shows the cost of spreading, not the ' +
      'throughput of 3 machines. No probe watches the Cluster (its `other client p99` would be of another server).',
    POLICY_NOTE,
  ],
};
