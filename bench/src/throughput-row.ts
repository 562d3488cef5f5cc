import type { Accounted } from './columns.js';
import { count } from './format.js';
import { KEY_LABEL, type KeySet } from './key-sets.js';
import type { SubjectFactory } from './limiters.js';
import type { BenchLimit } from './limits.js';
import type { SlackedBound, WindowReport } from './windows.js';

// What a throughput row is, whichever section runs it (throughput, many keys, Cluster): its task,
// what is measured, its name, and its ratio to its peer.

/** The row the others of a scenario are divided by: rate-limiter-flexible's `RateLimiterRedis`. */
export const PEER = 'RateLimiterRedis';

/** One row to measure: a limiter, a key set, a limit and a number of requests in flight. */
export interface ThroughputTask {
  readonly name: string;
  readonly limiter: string;
  readonly keys: KeySet;
  readonly limit: BenchLimit;
  readonly inFlight: number;
  /** The row this one is divided by: rate-limiter-flexible in the same scenario. */
  readonly peer: string | undefined;
  readonly make: SubjectFactory;
  /**
   * Timed in steady state (a full run): warmed up for `STEADY_WARMUP_MS`, then timed over
   * `STEADY_MEASURE_MS`, both longer than the longest sync period. For the 100,000-key rows.
   */
  readonly steady?: boolean;
  /**
   * Keys whose admissions are stamped and checked against `bound` (the bound of the limiter's mode),
   * given the stamps' slack plus the longest sync period the limiter reported (0 without the sync).
   */
  readonly checked?: {
    readonly keys: readonly string[];
    readonly bound: SlackedBound;
    readonly pieceMs?: number;
  };
}

/** One measured row. Latencies in ns. */
export interface ThroughputRow extends Accounted {
  readonly name: string;
  readonly limiter: string;
  readonly keys: number;
  readonly keySet: KeySet;
  readonly limit: string;
  readonly limitTitle: string;
  readonly ceiling: boolean;
  readonly inFlight: number;
  readonly peer: string | null;
  readonly decisions: number;
  readonly elapsedMs: number;
  readonly opsPerSecond: number;
  readonly p50Ns: number;
  readonly p99Ns: number;
  readonly p999Ns: number;
  /** Share of decisions that awaited a promise. */
  readonly awaitedShare: number;
  /** Decisions and ms of the warm-up: with 100,000 keys at a limit that bites, one pass over every key. */
  readonly warmup: { readonly decisions: number; readonly ms: number };
  /** Redis round trips (script calls) during the timed loop, by `INFO commandstats`. */
  readonly roundTrips: number;
  readonly roundTripsPer1000: number;
  /** Redis server µs in those calls, per decision. */
  readonly redisUsPerDecision: number;
  /**
   * The server's whole CPU (`INFO cpu`) over the timed loop, per decision, µs: its commands, and
   * reading requests, writing replies and expiring keys, which `redisUsPerDecision` leaves out.
   */
  readonly redisCpuUsPerDecision: number;
  /** Every command Redis counted in that time, those run inside the scripts included, by name. */
  readonly redisCommandsByName: Readonly<Record<string, number>>;
  /** Round trips by the limiter's `RedisStore.stats()` (on a Cluster, a pipeline of per-slot calls is one); `null` without one. */
  readonly storeCalls: number | null;
  /**
   * Keys per round trip, by the limiter's `RedisStore.stats()`: bucket keys, and the fleet set's key
   * of each sync round's heartbeat (on one hot key, about half of them); `null` without a store.
   */
  readonly keyOpsPerCall: number | null;
  /** The longest `stats().syncPeriodMs` the limiter reported in the row (`T`); `null` without the sync. */
  readonly syncPeriodMs: number | null;
  /** The worst window of the checked keys against the bound of the limiter's mode; `null` if none checked. */
  readonly window: WindowReport | null;
  /** ops/s over the peer row's ops/s. */
  timesPeer: number | null;
}

export function taskName(limiter: string, keys: KeySet, limit: BenchLimit, inFlight: number): string {
  return `${limiter} · ${KEY_LABEL[keys]} · ${limit.short}${inFlight > 1 ? ` · ${inFlight} in flight` : ''}`;
}

/** Fills in each row's ratio to its peer row, when the peer ran. */
export function relateToPeers(rows: ThroughputRow[]): void {
  const byName = new Map(rows.map((row) => [row.name, row]));
  for (const row of rows) {
    const peer = row.peer === null ? undefined : byName.get(row.peer);
    row.timesPeer = peer === undefined ? null : row.opsPerSecond / peer.opsPerSecond;
  }
}

/**
 * `a allowed, d denied` of a row and of its peer: a ratio is read against the work each did. Where
 * the peer denied nothing at a limit meant to bite, its timed part met no limit (on keys in turn,
 * a peer slower than the window revisits each key refilled), so the ratio is no limiter's at its limit.
 */
export function besidePeer(row: ThroughputRow, peer: ThroughputRow | undefined): string {
  const counts = (r: ThroughputRow) => `${count(r.allowed)} allowed, ${count(r.denied)} denied`;
  if (peer === undefined) return counts(row);
  const unbitten =
    row.ceiling || peer.denied > 0
      ? ''
      : row.denied > 0
        ? ": the peer's limit never bit, not the same work"
        : ': the limit bit neither, the admitting path alone';
  return `${counts(row)}; peer ${counts(peer)}${unbitten}`;
}
