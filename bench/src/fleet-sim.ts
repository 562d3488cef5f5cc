import { setTimeout as sleep } from 'node:timers/promises';
import { type Decision, defineLimit, type GlobalStore } from '@tiered-limiter/core';
import { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { RedisStore } from '@tiered-limiter/redis';
import { commandDelta } from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { type Accounted, columns, decisionWords } from './columns.js';
import { count, percent, small, times } from './format.js';
import { loopCell, POLICY_NOTE, watchHealth } from './health.js';
import type { StoreStats } from './limiters.js';
import { newHistogram, outcomeOf } from './loop.js';
import type { BenchSettings, Column, RunContext, Section } from './section.js';
import { CensusStore, censusDelta, type OpCensus, sumCensus } from './store-census.js';

export const FLEET_SIZES = [10, 50, 200] as const;
export const FLEET_KEYS = 10;
/** Requests per second across the whole fleet, whatever its size. */
export const FLEET_RATE = 10_000;
/** Each hot key's limit: twice its share of the traffic, so the limit does not bite. */
export const FLEET_LIMIT = defineLimit({ capacity: 2000, refillPerSecond: 2000, name: 'hot' });
/** Requests waiting on Redis at most; past it, due requests are skipped and counted. */
const MAX_PENDING = 5000;
const SETTLE_MS = 2000;
/** Simulated instances per ioredis connection: each has its own store and limiter, the socket is shared. */
const INSTANCES_PER_CONNECTION = 25;

export type FleetTier = 'request' | 'tiered';
const FLEET_TIERS: readonly [FleetTier, string][] = [
  ['request', 'RequestLimiter'],
  ['tiered', 'TieredLimiter'],
];

export interface FleetTask {
  readonly name: string;
  readonly tier: FleetTier;
  readonly limiter: string;
  readonly instances: number;
}

export function fleetTasks(): FleetTask[] {
  return FLEET_SIZES.flatMap((instances) =>
    FLEET_TIERS.map(([tier, limiter]) => ({ name: fleetName(limiter, instances), tier, limiter, instances })),
  );
}

/** `policy`: decisions of `open` (store timeouts, default 20 ms), in the counted time. */
export interface FleetRow extends Accounted {
  readonly name: string;
  readonly limiter: string;
  readonly instances: number;
  readonly keys: number;
  readonly targetRate: number;
  readonly measuredMs: number;
  readonly decisions: number;
  /** Due requests not sent because `MAX_PENDING` were waiting already. */
  readonly skipped: number;
  /** Decisions that awaited the store (a `consume` decided after a store call, or by the policy). */
  readonly storeWaits: number;
  /** Decisions `tryConsume` could not make (they went through the promise, the store's or not). */
  readonly promised: number;
  /** Script calls Redis ran in the counted time (`INFO commandstats`). */
  readonly roundTrips: number;
  /** `roundTrips` per second: what the hot keys' shard serves. */
  readonly redisCallsPerSecond: number;
  /** Every command per second, those run inside the scripts included. */
  readonly redisCommandsPerSecond: number;
  readonly roundTripsPer1000: number;
  /** The stores' own count of round trips, ops and keys over the counted time (`RedisStore.stats()`). */
  readonly store: StoreStats;
  /** TieredLimiter: ops by origin over the counted time (`CensusStore`); `null` for the per-request tier. */
  readonly census: OpCensus | null;
  /** TieredLimiter: its stats' `refills` and `refunds` (ops) over the counted time; `null` otherwise. */
  readonly refills: number | null;
  readonly refunds: number | null;
  /** TieredLimiter: `stats().syncPeriodMs` and `stats().instances` at the end (of every instance, if all agree). */
  readonly syncPeriodMs: number | null;
  readonly statsInstances: number | null;
  /** Whether the stores count live instances themselves (`heartbeat`): else the declared size stands. */
  readonly liveCount: boolean | null;
  readonly p50Ns: number;
  readonly p99Ns: number;
  /** The per-request row's Redis calls/s over this row's, for the same fleet. */
  timesFewerCalls: number | null;
}

export function fleetName(limiter: string, instances: number): string {
  return `${limiter} · fleet of ${instances} instances`;
}

interface Instance {
  readonly tryConsume: (key: string) => Decision | undefined;
  readonly consume: (key: string) => Promise<Decision>;
  readonly stats: () => Record<string, unknown>;
  readonly store: RedisStore;
  readonly census: CensusStore | undefined;
  readonly close: () => Promise<void>;
}

/** A numeric field of a limiter's `stats()`, or `null` when this version has none by that name. */
function statField(stats: Record<string, unknown>, field: string): number | null {
  const value = stats[field];
  return typeof value === 'number' ? value : null;
}

/**
 * The simulated instances' store timeout. Up to 200 instances share this process's event loop,
 * whose delay reaches 20–50 ms at 10,000 requests a second on 2 cores; with the default 20 ms the
 * simulation's own loop fired timeouts (34–381 policy decisions a run, each one a lease missed and
 * an out-of-band call), which an instance with a process of its own would not. 250 ms, as the
 * fleet-scale tests use for the same reason; a slow Redis still shows as policy decisions.
 */
const FLEET_TIMEOUT_MS = 250;

/** One instance: its own `RedisStore` (and census, for the two-tier limiter) and limiter. */
function makeInstance(tier: FleetTier, client: Redis, prefix: string, instances: number): Instance {
  const store = new RedisStore({ redis: client, prefix });
  const options = {
    limits: FLEET_LIMIT,
    failurePolicy: 'open' as const,
    instances,
    timeoutMs: FLEET_TIMEOUT_MS,
  };
  if (tier === 'request') {
    // The fleet size is the two-tier limiter's option: the per-request one refuses names it does not know.
    const { instances: _instances, ...requestOptions } = options;
    const limiter = new RequestLimiter({ ...requestOptions, store });
    return {
      tryConsume: () => undefined,
      consume: (k) => limiter.consume(k),
      stats: () => ({ ...limiter.stats() }),
      store,
      census: undefined,
      close: () => limiter.close(),
    };
  }
  const census = new CensusStore(store as GlobalStore, instances);
  const limiter = new TieredLimiter({ ...options, store: census });
  return {
    tryConsume: (k) => limiter.tryConsume(k),
    consume: (k) => limiter.consume(k),
    stats: () => ({ ...limiter.stats() }),
    store,
    census,
    close: () => limiter.close(),
  };
}

/** What the fleet's counters say at one moment. */
interface Snapshot {
  readonly store: StoreStats;
  readonly census: OpCensus | null;
  readonly refills: number | null;
  readonly refunds: number | null;
}

function snapshot(fleet: readonly Instance[]): Snapshot {
  const store = { calls: 0, ops: 0, keys: 0 };
  let refills: number | null = 0;
  let refunds: number | null = 0;
  for (const instance of fleet) {
    const s = instance.store.stats();
    store.calls += s.calls;
    store.ops += s.ops;
    store.keys += s.keys;
    const stats = instance.stats();
    const [a, b] = [statField(stats, 'refills'), statField(stats, 'refunds')];
    refills = a === null || refills === null ? null : refills + a;
    refunds = b === null || refunds === null ? null : refunds + b;
  }
  const censuses = fleet.flatMap((i) => (i.census === undefined ? [] : [i.census.census()]));
  const tiered = censuses.length > 0;
  return {
    store,
    census: tiered ? sumCensus(censuses) : null,
    refills: tiered ? refills : null,
    refunds: tiered ? refunds : null,
  };
}

/** The value every instance's stats give for `field`, or `null` when they disagree or have none. */
function agreed(fleet: readonly Instance[], field: string): number | null {
  const values = new Set(fleet.map((i) => statField(i.stats(), field)));
  return values.size === 1 ? [...values][0]! : null;
}

/**
 * `instances` simulated app servers in this process, each with its own `RedisStore` and limiter
 * (told `instances`), sharing an ioredis connection per 25 of them and `FLEET_KEYS` hot keys.
 * Requests arrive at `FLEET_RATE` per second in total, paced on a 1 ms tick, each to a random
 * instance and key, as a load balancer spreads them. Redis's commands are counted after
 * `fleetWarmupMs`, for `fleetMs`.
 */
export async function measureFleet(task: FleetTask, context: RunContext): Promise<FleetRow> {
  const { target, settings } = context;
  if (target === undefined) throw new Error('fleet rows need Redis');
  const { instances, tier } = task;
  const fleet: Instance[] = [];
  const connections = Math.ceil(instances / INSTANCES_PER_CONNECTION);
  const clients = await Promise.all(Array.from({ length: connections }, () => target.client()));
  try {
    // Instances start spread over one sync period, as a fleet's do (a deploy, a restart, autoscaling):
    // made in the same millisecond, 200 instances synced in lockstep, and a 5 s count caught five
    // rounds of a 1.11 s period where the long run has 4.5.
    for (let i = 0; i < instances; i++) {
      fleet.push(makeInstance(tier, clients[i % connections]!, context.prefix, instances));
      const periodMs = statField(fleet[0]!.stats(), 'syncPeriodMs') ?? 0;
      if (periodMs > 0) await sleep(periodMs / instances);
    }
    const keys = Array.from({ length: FLEET_KEYS }, (_, i) => `hot:${i}`);
    const latency = newHistogram();
    let decisions = 0;
    const tally = [0, 0, 0, 0];
    let pending = 0;
    let skipped = 0;
    let storeWaits = 0;
    let promised = 0;
    let measuring = false;
    /** Counts a decision made in the counted time; `viaPromise`: `tryConsume` could not make it. */
    const record = (startedAt: number, decision: Decision, viaPromise: boolean) => {
      if (!measuring) return;
      decisions++;
      tally[outcomeOf(decision)]!++;
      latency.recordValue(Math.max(1, Math.round((performance.now() - startedAt) * 1e6)));
      if (!viaPromise) return;
      promised++;
      // A decision made after a store call, or by the policy, waited for the store.
      if (decision.tier === 'global' || decision.tier === 'fallback') storeWaits++;
    };
    const issue = () => {
      const instance = fleet[(Math.random() * instances) | 0]!;
      const key = keys[(Math.random() * FLEET_KEYS) | 0]!;
      const startedAt = performance.now();
      const fast = instance.tryConsume(key);
      if (fast !== undefined) return record(startedAt, fast, false);
      pending++;
      void instance.consume(key).then((d) => {
        pending--;
        record(startedAt, d, true);
      });
    };

    let before = await target.commandStats();
    let counters = snapshot(fleet);
    let watch = watchHealth(target.probe);
    const start = performance.now();
    let measuredFrom = start;
    let issued = 0;
    for (;;) {
      const now = performance.now();
      if (!measuring && now - start >= settings.fleetWarmupMs) {
        await watch.stop();
        watch = watchHealth(target.probe);
        before = await target.commandStats();
        counters = snapshot(fleet);
        measuring = true;
        measuredFrom = performance.now();
      }
      if (measuring && now - measuredFrom >= settings.fleetMs) break;
      const due = Math.floor(((now - start) * FLEET_RATE) / 1000);
      for (; issued < due; issued++) {
        if (pending >= MAX_PENDING) {
          if (measuring) skipped += due - issued;
          issued = due;
          break;
        }
        issue();
      }
      await sleep(1);
    }
    measuring = false;
    const measuredMs = performance.now() - measuredFrom;
    const health = await watch.stop();
    const redis = commandDelta(before, await target.commandStats());
    const after = snapshot(fleet);
    const less = (a: number | null, b: number | null) => (a === null || b === null ? null : a - b);
    const settleBy = performance.now() + SETTLE_MS;
    while (pending > 0 && performance.now() < settleBy) await sleep(1);
    const storeCalls = after.store.calls - counters.store.calls;
    const tiered = tier === 'tiered';
    return {
      name: task.name,
      limiter: task.limiter,
      instances,
      keys: FLEET_KEYS,
      targetRate: FLEET_RATE,
      measuredMs,
      decisions,
      allowed: tally[1]!,
      denied: tally[0]!,
      policy: { allowed: tally[3]!, denied: tally[2]! },
      health,
      skipped,
      storeWaits,
      promised,
      roundTrips: redis.roundTrips,
      redisCallsPerSecond: (redis.roundTrips * 1000) / measuredMs,
      redisCommandsPerSecond: (redis.commands * 1000) / measuredMs,
      roundTripsPer1000: decisions === 0 ? 0 : (1000 * redis.roundTrips) / decisions,
      store: {
        calls: storeCalls,
        ops: after.store.ops - counters.store.ops,
        keys: after.store.keys - counters.store.keys,
      },
      census:
        after.census === null || counters.census === null ? null : censusDelta(counters.census, after.census),
      refills: less(after.refills, counters.refills),
      refunds: less(after.refunds, counters.refunds),
      syncPeriodMs: tiered ? agreed(fleet, 'syncPeriodMs') : null,
      statsInstances: tiered ? agreed(fleet, 'instances') : null,
      liveCount: fleet[0]?.census?.liveCount ?? null,
      p50Ns: latency.getValueAtPercentile(50),
      p99Ns: latency.getValueAtPercentile(99),
      timesFewerCalls: null,
    };
  } finally {
    await Promise.all(fleet.map((instance) => instance.close()));
    for (const client of clients) client.disconnect();
  }
}

/** Each two-tier row's Redis calls against the per-request row of the same fleet size. */
function relateToPerRequest(rows: FleetRow[]): void {
  for (const row of rows) {
    const perRequest = rows.find((r) => r.limiter === 'RequestLimiter' && r.instances === row.instances);
    row.timesFewerCalls =
      perRequest === undefined || row.redisCallsPerSecond === 0
        ? null
        : perRequest.redisCallsPerSecond / row.redisCallsPerSecond;
  }
}

const perSecond = (r: FleetRow, n: number | null | undefined) =>
  n === null || n === undefined ? '—' : count((n * 1000) / r.measuredMs);

const share = (r: FleetRow, n: number) => (r.decisions === 0 ? '—' : percent(n / r.decisions, 2));

const COLUMNS: readonly Column<FleetRow>[] = [
  { title: 'decisions/s', cell: (r) => count((r.decisions * 1000) / r.measuredMs) },
  ...columns.decisions<FleetRow>(),
  { title: 'Redis calls/s', cell: (r) => count(r.redisCallsPerSecond) },
  { title: 'sync calls/s', cell: (r) => perSecond(r, r.census?.syncCalls) },
  {
    title: 'other calls/s',
    cell: (r) => (r.census === null ? '—' : perSecond(r, Math.max(0, r.roundTrips - r.census.syncCalls))),
  },
  { title: 'out-of-band ops/s', cell: (r) => perSecond(r, r.census?.outOfBand) },
  { title: 'refund ops/s', cell: (r) => perSecond(r, r.census?.refund) },
  {
    title: '× fewer calls',
    cell: (r) =>
      r.timesFewerCalls === null || r.limiter === 'RequestLimiter' ? '—' : times(r.timesFewerCalls),
  },
  { title: 'key-ops / call', cell: (r) => (r.store.calls === 0 ? '—' : small(r.store.keys / r.store.calls)) },
  { title: 'waited on store', cell: (r) => share(r, r.storeWaits) },
  { title: 'via promise', cell: (r) => share(r, r.promised) },
  { title: 'sync period', cell: (r) => (r.syncPeriodMs === null ? '—' : `${count(r.syncPeriodMs)} ms`) },
  ...columns.latency<FleetRow>(),
  { title: 'skipped', cell: (r) => count(r.skipped) },
  columns.loop<FleetRow>(),
  columns.probe<FleetRow>(),
];

export const fleetSection: Section<FleetTask, FleetRow> = {
  id: 'fleet',
  title: `Fleet simulation: ${FLEET_KEYS} hot keys, ${count(FLEET_RATE)} requests/s in total`,
  usesRedis: true,
  tasks: () => fleetTasks(),
  measure: measureFleet,
  progress: (row) =>
    `${row.name}: ${count(row.redisCallsPerSecond)} Redis calls/s` +
    (row.census === null ? '' : ` (sync ${perSecond(row, row.census.syncCalls)})`) +
    `, waited on store ${share(row, row.storeWaits)}, ${decisionWords(row)}, loop ${loopCell(row.health)}`,
  columns: COLUMNS,
  finish: relateToPerRequest,
  notes: (s: BenchSettings) => [
    'The real limiters, simulated app servers in one process: each instance has its own `RedisStore` and limiter ' +
      `(told \`instances\` = the fleet size, \`failurePolicy: open\`, a ${FLEET_TIMEOUT_MS} ms store timeout: the instances share one event loop; the two-tier ` +
      `limiter with its default periodic sync), started spread over one sync period as a fleet's instances are, ` +
      `${INSTANCES_PER_CONNECTION} instances share an ioredis connection, and ` +
      `all share ${FLEET_KEYS} hot keys, each limited to 2,000 per second (capacity 2,000): twice its share of the ` +
      `traffic. Requests arrive at ${count(FLEET_RATE)} per second in total whatever the fleet size, paced on a 1 ms ` +
      'tick, each to a random instance and key, as a load balancer spreads them; at most 5,000 wait on Redis (more ' +
      `are skipped and counted). ${count(s.fleetWarmupMs)} ms of warm-up, then ${count(s.fleetMs)} ms counted.`,
    "**Redis calls/s**: script calls (EVALSHA) from `INFO commandstats` over the counted time, what the hot keys' " +
      'shard serves. **× fewer calls**: the per-request row of the same fleet over this one. **sync calls/s**: the ' +
      "periodic syncs' calls (each sync's keys ÷ 32, rounded up; 10 keys make one); **other calls/s**: the rest. " +
      "The limiter's stats count ops, not calls, and do not tell a sync's op from another: each instance's store is " +
      'wrapped (`CensusStore`) to sort ops by origin: a sync begins with a heartbeat and sends its ops in the same ' +
      'drain of the microtask queue; other ops asking for tokens are **out-of-band** (a refill or a take for a ' +
      'waiting request), the rest only report (**refund**). While `RedisStore` has no `heartbeat`, the wrapper ' +
      'answers with the declared fleet size, as the limiter would assume (`latest.json`: `liveCount`).',
    '**waited on store**: decisions made after a store call (or by the policy); **via promise**: decisions ' +
      "`tryConsume` could not make, the store's or not (the cold path also spends from a lease whose first grant " +
      'expired). **sync period**: `stats().syncPeriodMs`, the same on every instance.',
    POLICY_NOTE,
  ],
};
