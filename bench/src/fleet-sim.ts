import { setTimeout as sleep } from 'node:timers/promises';
import { defineLimit } from '@tiered-limiter/core';
import { createRedisLimiter, createTieredLimiter } from '@tiered-limiter/redis';
import type { Redis } from 'ioredis';
import { commandDelta } from './commandstats.js';
import { newHistogram } from './loop.js';
import type { BenchRedis } from './redis-target.js';

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
export const FLEET_TIERS: readonly { tier: FleetTier; limiter: string }[] = [
  { tier: 'request', limiter: 'RequestLimiter' },
  { tier: 'tiered', limiter: 'TieredLimiter' },
];

export interface FleetRow {
  readonly name: string;
  readonly limiter: string;
  readonly instances: number;
  readonly keys: number;
  readonly targetRate: number;
  readonly measuredMs: number;
  readonly decisions: number;
  readonly admittedShare: number;
  /** Due requests not sent because `MAX_PENDING` were waiting already. */
  readonly skipped: number;
  /** Decisions the failure policy made (store timeouts, default 20 ms), warm-up included. */
  readonly fallbacks: number;
  /** TieredLimiter: its own count of refills (`reserve`) and refunds, over the counted time. */
  readonly refills: number;
  readonly refunds: number;
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
  readonly tryConsume: (key: string) => { allowed: boolean } | undefined;
  readonly consume: (key: string) => Promise<{ allowed: boolean }>;
  readonly fallbacks: () => number;
  /** The two-tier limiter's lease refills and refunds so far; [0, 0] for the per-request one. */
  readonly leaseCalls: () => [refills: number, refunds: number];
  readonly close: () => Promise<void>;
}

/**
 * `instances` simulated app servers in this process, each with its own ioredis connection and its
 * own limiter (told `instances`), sharing `FLEET_KEYS` hot keys. Requests arrive at `FLEET_RATE`
 * per second in total, paced on a 1 ms tick, each to a random instance and key, as a load
 * balancer spreads them. Redis's commands are counted after `warmupMs`, for `durationMs`.
 */
export async function measureFleet(
  target: BenchRedis,
  prefix: string,
  tier: FleetTier,
  limiter: string,
  instances: number,
  warmupMs: number,
  durationMs: number,
): Promise<FleetRow> {
  const fleet: Instance[] = [];
  try {
    const clients = await Promise.all(Array.from({ length: instances }, () => target.client()));
    for (const client of clients) {
      const options = {
        redis: client,
        prefix,
        limits: FLEET_LIMIT,
        failurePolicy: 'open' as const,
        instances,
      };
      if (tier === 'request') {
        const l = createRedisLimiter(options);
        fleet.push({
          client,
          tryConsume: () => undefined,
          consume: (k) => l.consume(k),
          fallbacks: () => l.stats().decisions.fallback,
          leaseCalls: () => [0, 0],
          close: () => l.close(),
        });
      } else {
        const l = createTieredLimiter(options);
        fleet.push({
          client,
          tryConsume: (k) => l.tryConsume(k),
          consume: (k) => l.consume(k),
          fallbacks: () => l.stats().decisions.fallback,
          leaseCalls: () => {
            const stats = l.stats();
            return [stats.refills, stats.refunds];
          },
          close: () => l.close(),
        });
      }
    }
    const keys = Array.from({ length: FLEET_KEYS }, (_, i) => `hot:${i}`);
    const latency = newHistogram();
    let decisions = 0;
    let admitted = 0;
    let pending = 0;
    let skipped = 0;
    let measuring = false;
    const record = (startedAt: number, allowed: boolean) => {
      if (!measuring) return;
      decisions++;
      if (allowed) admitted++;
      latency.recordValue(Math.max(1, Math.round((performance.now() - startedAt) * 1e6)));
    };
    const issue = () => {
      const instance = fleet[(Math.random() * instances) | 0]!;
      const key = keys[(Math.random() * FLEET_KEYS) | 0]!;
      const startedAt = performance.now();
      const fast = instance.tryConsume(key);
      if (fast !== undefined) return record(startedAt, fast.allowed);
      pending++;
      void instance.consume(key).then((d) => {
        pending--;
        record(startedAt, d.allowed);
      });
    };

    const leaseCalls = (): [number, number] => {
      let refills = 0;
      let refunds = 0;
      for (const instance of fleet) {
        const [a, b] = instance.leaseCalls();
        refills += a;
        refunds += b;
      }
      return [refills, refunds];
    };
    let before = await target.commandCalls();
    let leaseBefore = leaseCalls();
    const start = performance.now();
    let measuredFrom = start;
    let issued = 0;
    for (;;) {
      const now = performance.now();
      if (!measuring && now - start >= warmupMs) {
        before = await target.commandCalls();
        leaseBefore = leaseCalls();
        measuring = true;
        measuredFrom = performance.now();
      }
      if (measuring && now - measuredFrom >= durationMs) break;
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
    const redis = commandDelta(before, await target.commandCalls());
    const leaseAfter = leaseCalls();
    const settleBy = performance.now() + SETTLE_MS;
    while (pending > 0 && performance.now() < settleBy) await sleep(1);
    return {
      name: fleetName(limiter, instances),
      limiter,
      instances,
      keys: FLEET_KEYS,
      targetRate: FLEET_RATE,
      measuredMs,
      decisions,
      admittedShare: decisions === 0 ? 0 : admitted / decisions,
      skipped,
      fallbacks: fleet.reduce((sum, instance) => sum + instance.fallbacks(), 0),
      refills: leaseAfter[0] - leaseBefore[0],
      refunds: leaseAfter[1] - leaseBefore[1],
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
