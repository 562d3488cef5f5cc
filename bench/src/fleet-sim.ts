import { setTimeout as sleep } from 'node:timers/promises';
import { type Decision, defineLimit } from '@tiered-limiter/core';
import { createRedisLimiter, createTieredLimiter } from '@tiered-limiter/redis';
import { commandDelta } from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { type Accounted, columns, decisionWords } from './columns.js';
import { count } from './format.js';
import { loopCell, POLICY_NOTE, watchHealth } from './health.js';
import { newHistogram, outcomeOf } from './loop.js';
import type { BenchSettings, Column, RunContext, Section } from './section.js';

export const FLEET_SIZES = [10, 50, 200] as const;
export const FLEET_KEYS = 10;
/** Requests per second across the whole fleet, whatever its size. */
export const FLEET_RATE = 10_000;
/** Each hot key's limit: twice its share of the traffic, so the limit does not bite. */
export const FLEET_LIMIT = defineLimit({ capacity: 2000, refillPerSecond: 2000, name: 'hot' });
/** Requests waiting on Redis at most; past it, due requests are skipped and counted. */
const MAX_PENDING = 5000;
const SETTLE_MS = 2000;

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
  /** TieredLimiter: its own count of refills (`reserve`) and refunds over the counted time, when its stats say. */
  readonly refills: number | null;
  readonly refunds: number | null;
  /** Script calls Redis ran in the counted time (`INFO commandstats`). */
  readonly roundTrips: number;
  /** `roundTrips` per second: what the hot keys' shard serves. */
  readonly redisCallsPerSecond: number;
  /** Every command per second, those run inside the scripts included. */
  readonly redisCommandsPerSecond: number;
  readonly roundTripsPer1000: number;
  readonly p50Ns: number;
  readonly p99Ns: number;
}

export function fleetName(limiter: string, instances: number): string {
  return `${limiter} · fleet of ${instances} instances`;
}

interface Instance {
  readonly client: Redis;
  readonly tryConsume: (key: string) => Decision | undefined;
  readonly consume: (key: string) => Promise<Decision>;
  readonly stats: () => unknown;
  readonly close: () => Promise<void>;
}

/** A numeric field of a limiter's `stats()`, or `null` when this version has none by that name. */
function statField(stats: unknown, field: string): number | null {
  const value = (stats as Record<string, unknown> | undefined)?.[field];
  return typeof value === 'number' ? value : null;
}

/**
 * `instances` simulated app servers in this process, each with its own ioredis connection and its
 * own limiter (told `instances`), sharing `FLEET_KEYS` hot keys. Requests arrive at `FLEET_RATE`
 * per second in total, paced on a 1 ms tick, each to a random instance and key, as a load
 * balancer spreads them. Redis's commands are counted after `fleetWarmupMs`, for `fleetMs`.
 */
export async function measureFleet(task: FleetTask, context: RunContext): Promise<FleetRow> {
  const { target, settings } = context;
  if (target === undefined) throw new Error('fleet rows need Redis');
  const { instances, tier } = task;
  const fleet: Instance[] = [];
  try {
    const clients = await Promise.all(Array.from({ length: instances }, () => target.client()));
    for (const client of clients) {
      const options = {
        redis: client,
        prefix: context.prefix,
        limits: FLEET_LIMIT,
        failurePolicy: 'open' as const,
        instances,
      };
      const l = tier === 'request' ? createRedisLimiter(options) : createTieredLimiter(options);
      fleet.push({
        client,
        tryConsume: 'tryConsume' in l ? (k) => l.tryConsume(k) : () => undefined,
        consume: (k) => l.consume(k),
        stats: () => l.stats(),
        close: () => l.close(),
      });
    }
    const keys = Array.from({ length: FLEET_KEYS }, (_, i) => `hot:${i}`);
    const latency = newHistogram();
    let decisions = 0;
    const tally = [0, 0, 0, 0];
    let pending = 0;
    let skipped = 0;
    let measuring = false;
    const record = (startedAt: number, decision: Decision) => {
      if (!measuring) return;
      decisions++;
      tally[outcomeOf(decision)]!++;
      latency.recordValue(Math.max(1, Math.round((performance.now() - startedAt) * 1e6)));
    };
    const issue = () => {
      const instance = fleet[(Math.random() * instances) | 0]!;
      const key = keys[(Math.random() * FLEET_KEYS) | 0]!;
      const startedAt = performance.now();
      const fast = instance.tryConsume(key);
      if (fast !== undefined) return record(startedAt, fast);
      pending++;
      void instance.consume(key).then((d) => {
        pending--;
        record(startedAt, d);
      });
    };

    /** Refills and refunds so far over the fleet, each `null` if the stats do not say. */
    const leaseCalls = (): [number | null, number | null] => {
      const total = (field: string) => {
        let sum: number | null = 0;
        for (const instance of fleet) {
          const value = statField(instance.stats(), field);
          sum = value === null || sum === null ? null : sum + value;
        }
        return tier === 'tiered' ? sum : null;
      };
      return [total('refills'), total('refunds')];
    };
    let before = await target.commandStats();
    let leaseBefore = leaseCalls();
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
        leaseBefore = leaseCalls();
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
    const leaseAfter = leaseCalls();
    const delta = (i: 0 | 1) =>
      leaseAfter[i] === null || leaseBefore[i] === null ? null : leaseAfter[i]! - leaseBefore[i]!;
    const settleBy = performance.now() + SETTLE_MS;
    while (pending > 0 && performance.now() < settleBy) await sleep(1);
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
      refills: delta(0),
      refunds: delta(1),
      roundTrips: redis.roundTrips,
      redisCallsPerSecond: (redis.roundTrips * 1000) / measuredMs,
      redisCommandsPerSecond: (redis.commands * 1000) / measuredMs,
      roundTripsPer1000: decisions === 0 ? 0 : (1000 * redis.roundTrips) / decisions,
      p50Ns: latency.getValueAtPercentile(50),
      p99Ns: latency.getValueAtPercentile(99),
    };
  } finally {
    await Promise.all(fleet.map((instance) => instance.close()));
    for (const instance of fleet) instance.client.disconnect();
  }
}

const COLUMNS: readonly Column<FleetRow>[] = [
  { title: 'decisions/s', cell: (r) => count((r.decisions * 1000) / r.measuredMs) },
  ...columns.decisions<FleetRow>(),
  { title: 'Redis calls/s', cell: (r) => count(r.redisCallsPerSecond) },
  columns.roundTrips<FleetRow>(),
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
    `${row.name}: ${count(row.redisCallsPerSecond)} Redis calls/s, ${decisionWords(row)}, loop ${loopCell(row.health)}`,
  columns: COLUMNS,
  notes: (s: BenchSettings) => [
    `Simulated app servers in one process, each with its own ioredis connection and its own limiter (told ` +
      `\`instances\` = the fleet size, \`failurePolicy: open\`, the default 20 ms timeout), share ${FLEET_KEYS} hot ` +
      `keys, each limited to 2,000 per second (capacity 2,000): twice its share, so the limit does not bite here. ` +
      `Requests arrive at ${count(FLEET_RATE)} per second in total whatever the fleet size, paced on a 1 ms tick, ` +
      'each to a random server and key, as a load balancer spreads them; at most 5,000 wait on Redis (more are ' +
      `skipped and counted). ${count(s.fleetWarmupMs)} ms of warm-up, then ${count(s.fleetMs)} ms counted.`,
    "**Redis calls/s** is what the hot keys' shard serves: script calls (EVALSHA) from `INFO commandstats` over " +
      "the counted time. The two-tier limiter's are lease refills, and refunds of leases that expired unspent " +
      '(`refills` and `refunds` per row in `latest.json`, from its stats when they have those fields).',
    POLICY_NOTE,
  ],
};
