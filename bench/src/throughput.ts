import { defineLimit } from '@tiered-limiter/core';
import type { Redis } from 'ioredis';
import { commandDelta } from './commandstats.js';
import {
  bareStore,
  clockOnly,
  localLimiter,
  noLimiter,
  peerLimitOf,
  requestLimiter,
  rlfMemory,
  rlfRedis,
  type Subject,
  tieredLimiter,
} from './limiters.js';
import { type LoopBounds, runLoop } from './loop.js';
import type { BenchRedis } from './redis-target.js';

/**
 * The throughput rows' limit: a billion a second with a burst of a billion, so every call is
 * admitted and each row times the admitting path, the one a healthy service runs most.
 */
export const OPEN_LIMIT = defineLimit({
  capacity: 1_000_000_000,
  refillPerSecond: 1_000_000_000,
  name: 'open',
});

export const MANY_KEYS = 100_000;
export const IN_FLIGHT = [1, 64, 256] as const;
export const BASELINE = 'baseline · no limiter';

type KeySet = 'hot' | 'many';
const KEY_LABEL: Record<KeySet, string> = { hot: '1 hot key', many: '100k keys' };

/** One row to measure. */
export interface ThroughputTask {
  readonly name: string;
  readonly limiter: string;
  readonly scenario: string;
  readonly keys: KeySet;
  readonly inFlight: number;
  /** The row this one is divided by: rate-limiter-flexible in the same scenario. */
  readonly peer: string | undefined;
  readonly make: ((redis: Redis, prefix: string) => Subject) | (() => Subject);
  readonly usesRedis: boolean;
}

/** One measured row. Latencies in ns. */
export interface ThroughputRow {
  readonly name: string;
  readonly limiter: string;
  readonly scenario: string;
  readonly keys: number;
  readonly inFlight: number;
  readonly peer: string | null;
  readonly decisions: number;
  readonly elapsedMs: number;
  readonly opsPerSecond: number;
  readonly meanNs: number;
  readonly p50Ns: number;
  readonly p99Ns: number;
  readonly p999Ns: number;
  /** Share of decisions admitted: 1 shows the limit never bit. */
  readonly admittedShare: number;
  /** Share of decisions that awaited a promise. */
  readonly awaitedShare: number;
  /** Decisions the failure policy made (a store call failed or timed out): 0 in a healthy run; null if unknown. */
  readonly fallbacks: number | null;
  /** Redis round trips (script calls) during the timed loop, by `INFO commandstats`; null in process. */
  readonly roundTrips: number | null;
  readonly roundTripsPer1000: number | null;
  /** Every command Redis counted in that time, those run inside the scripts included, by name. */
  readonly redisCommandsByName: Readonly<Record<string, number>> | null;
  /** ops/s over the peer row's ops/s. */
  timesPeer: number | null;
}

function scenarioName(keys: KeySet, inFlight: number): string {
  return inFlight === 1 ? KEY_LABEL[keys] : `${KEY_LABEL[keys]} · ${inFlight} in flight`;
}

/** Every throughput row, in the order they run. Rows without "in flight" run one decision at a time. */
export function throughputTasks(): ThroughputTask[] {
  const tasks: ThroughputTask[] = [];
  const peerLimit = peerLimitOf(OPEN_LIMIT);
  const inProcess = (
    limiter: string,
    scenario: string,
    keys: KeySet,
    peer: string | undefined,
    make: () => Subject,
  ) =>
    tasks.push({
      name: `${limiter} · ${scenario}`,
      limiter,
      scenario,
      keys,
      inFlight: 1,
      peer,
      make,
      usesRedis: false,
    });

  inProcess('baseline', 'no limiter', 'hot', undefined, noLimiter);
  inProcess('baseline', 'performance.now() alone', 'hot', undefined, clockOnly);
  for (const keys of ['hot', 'many'] as const) {
    const peer = `RateLimiterMemory · ${KEY_LABEL[keys]}`;
    inProcess('LocalLimiter', KEY_LABEL[keys], keys, peer, () => localLimiter(OPEN_LIMIT, MANY_KEYS));
    inProcess('RateLimiterMemory', KEY_LABEL[keys], keys, peer, () => rlfMemory(peerLimit));
  }

  const onRedis: [string, (redis: Redis, prefix: string) => Subject][] = [
    ['RedisStore.take', (redis, prefix) => bareStore(redis, prefix, OPEN_LIMIT)],
    ['RequestLimiter', (redis, prefix) => requestLimiter(redis, prefix, OPEN_LIMIT)],
    ['TieredLimiter', (redis, prefix) => tieredLimiter(redis, prefix, OPEN_LIMIT, MANY_KEYS)],
    ['RateLimiterRedis', (redis, prefix) => rlfRedis(redis, prefix, peerLimit)],
  ];
  for (const keys of ['hot', 'many'] as const) {
    for (const inFlight of IN_FLIGHT) {
      const scenario = scenarioName(keys, inFlight);
      for (const [limiter, make] of onRedis) {
        tasks.push({
          name: `${limiter} · ${scenario}`,
          limiter,
          scenario,
          keys,
          inFlight,
          peer: `RateLimiterRedis · ${scenario}`,
          make,
          usesRedis: true,
        });
      }
    }
  }
  return tasks;
}

const HOT_KEYS = ['user:1'];
let manyKeys: string[] | undefined;

/** Warms a fresh limiter up, then times it within `bounds`, counting Redis's commands around the timed part. */
export async function measureThroughput(
  task: ThroughputTask,
  target: BenchRedis,
  prefix: string,
  warmup: LoopBounds,
  bounds: LoopBounds,
): Promise<ThroughputRow> {
  manyKeys ??= Array.from({ length: MANY_KEYS }, (_, i) => `user:${i}`);
  const keys = task.keys === 'hot' ? HOT_KEYS : manyKeys;
  const client = task.usesRedis ? await target.client() : undefined;
  const subject = client === undefined ? (task.make as () => Subject)() : task.make(client, prefix);
  try {
    await runLoop(subject.decider, keys, task.inFlight, warmup);
    const fallbacksBefore = subject.fallbacks?.() ?? 0;
    const before = task.usesRedis ? await target.commandCalls() : undefined;
    const result = await runLoop(subject.decider, keys, task.inFlight, bounds);
    const redis = before === undefined ? undefined : commandDelta(before, await target.commandCalls());
    const fallbacks = subject.fallbacks === undefined ? null : subject.fallbacks() - fallbacksBefore;
    const h = result.latencyNs;
    return {
      name: task.name,
      limiter: task.limiter,
      scenario: task.scenario,
      keys: keys.length,
      inFlight: task.inFlight,
      peer: task.peer ?? null,
      decisions: result.decisions,
      elapsedMs: result.elapsedMs,
      opsPerSecond: (result.decisions * 1000) / result.elapsedMs,
      meanNs: (result.elapsedMs * 1e6) / result.decisions,
      p50Ns: h.getValueAtPercentile(50),
      p99Ns: h.getValueAtPercentile(99),
      p999Ns: h.getValueAtPercentile(99.9),
      admittedShare: result.admitted / result.decisions,
      awaitedShare: result.awaited / result.decisions,
      fallbacks,
      roundTrips: redis?.roundTrips ?? null,
      roundTripsPer1000: redis === undefined ? null : (1000 * redis.roundTrips) / result.decisions,
      redisCommandsByName: redis?.byCommand ?? null,
      timesPeer: null,
    };
  } finally {
    await subject.close();
    client?.disconnect();
  }
}

/** Fills in each row's ratio to its peer row, when the peer ran. */
export function relateToPeers(rows: ThroughputRow[]): void {
  const byName = new Map(rows.map((row) => [row.name, row]));
  for (const row of rows) {
    const peer = row.peer === null ? undefined : byName.get(row.peer);
    row.timesPeer = peer === undefined ? null : row.opsPerSecond / peer.opsPerSecond;
  }
}
