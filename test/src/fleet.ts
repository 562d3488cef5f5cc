import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const WORKER = fileURLToPath(new URL('./fleet-worker.mjs', import.meta.url));
const READY_TIMEOUT_MS = 30_000;
/** From "all ready" to the common start: time for the start message to reach every worker. */
const START_DELAY_MS = 100;

/** What one fleet worker is told, as JSON. */
export interface FleetOrders {
  readonly url: string;
  readonly prefix: string;
  /**
   * `tiered`: `createTieredLimiter`; `request`: `createRedisLimiter`; `rlf`: rate-limiter-flexible's
   * `RateLimiterRedis` with `peer` as its limit.
   */
  readonly tier: 'tiered' | 'request' | 'rlf';
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly limitName?: string;
  /** rate-limiter-flexible's limit, for `tier: 'rlf'`. */
  readonly peer?: { readonly points: number; readonly durationS: number };
  /** @default 'closed' */
  readonly failurePolicy?: 'open' | 'closed' | 'local';
  readonly instances: number;
  /** The key, or with `keys` > 1 the stem of `key:0` … `key:N−1`, taken in turn. @default 'shared' */
  readonly key?: string;
  /** @default 1 */
  readonly keys?: number;
  /**
   * With `keys` > 1: the share of decisions (0 to 1) that go to key 0, the hot key; the others
   * take the rest in turn. Spread evenly, not drawn at random. @default 0 (every key in turn)
   */
  readonly hotShare?: number;
  /**
   * Limiter instances in this process, each with its own `RedisStore` on the process's one
   * connection; each decision goes to one of them at random. @default 1
   */
  readonly limiters?: number;
  readonly durationMs: number;
  readonly maxDecisions: number;
  /** Each loop sends this many requests per second (paced); absent: as fast as it can (hammer). */
  readonly requestsPerSecond?: number;
  /** Loops running at once. @default 1 */
  readonly concurrency?: number;
  /** The limiter's `lease` option. */
  readonly lease?: Readonly<Record<string, unknown>>;
  /** Merged last into the limiter's options, verbatim: options this worker does not know pass through. */
  readonly options?: Readonly<Record<string, unknown>>;
  /** Merged into each `RedisStore`'s options (e.g. `coalesce`). */
  readonly storeOptions?: Readonly<Record<string, unknown>>;
}

/** What one fleet worker reports. Times are `Date.now()` in the worker. */
export interface FleetReport {
  readonly decisions: number;
  /** Admitted by the limit (not by the failure policy). */
  readonly allowed: number;
  /** Denied by the limit (not by the failure policy). */
  readonly denied: number;
  /** Decisions of the failure policy (`tier: 'fallback'`): outside the limit's bound. */
  readonly fallback: { readonly allowed: number; readonly denied: number };
  /** Decisions by `Decision.tier`. */
  readonly byTier: Readonly<Record<string, number>>;
  /** When the limit admitted, in order. */
  readonly admittedAt: number[];
  /** The same per key (`key:i` at index i), with `keys` > 1. */
  readonly admittedAtByKey?: number[][];
  /** Paced loops: the longest decision, in ms. */
  readonly lateMs: number;
  /** The worker's event-loop delay over the run (`monitorEventLoopDelay`, 10 ms resolution). */
  readonly loopDelayMs: { readonly p50: number; readonly p99: number; readonly max: number };
  readonly startedAt: number;
  /**
   * When the worker last asked for a decision (`Date.now()` ms): the end of its traffic. It ends
   * later (`endedAt`), once the decisions it still awaits are answered.
   */
  readonly lastRequestAt: number;
  readonly endedAt: number;
  /** The (first) limiter's `stats()` at the end, as it gave them (`undefined` for `rlf`). */
  readonly stats: { readonly [field: string]: unknown } | undefined;
  /** Every hosted limiter's `stats()` at the end (one entry per `limiters`). */
  readonly limiterStats: readonly ({ readonly [field: string]: unknown } | undefined)[];
  /** The longest `stats().syncPeriodMs` of any hosted limiter during the run (0 without the sync). */
  readonly longestSyncPeriodMs: number;
  /** The hosted stores' `stats()` summed (`undefined` for `rlf`): round trips, ops and keys sent. */
  readonly storeStats: { readonly calls: number; readonly ops: number; readonly keys: number } | undefined;
}

/** Options of `runFleet`. */
export interface RunFleetOptions {
  /** How long past its `durationMs` a worker may take to report before the run fails. @default 15_000 */
  readonly graceMs?: number;
  /** Called with the common start (`Date.now()` ms) once every worker is ready: to time readings during the run. */
  readonly onStart?: (startAt: number) => void;
  /**
   * How long the limiters run idle once every worker is ready, before the traffic starts: a
   * fleet that has been running, not one just made (optimistic cold start gives credit only a
   * spacing into an instance's life). @default 0
   */
  readonly idleBeforeMs?: number;
}

type WorkerMessage = { readonly type: 'ready' } | { readonly type: 'report'; readonly report: FleetReport };

/**
 * Runs one worker process per entry of `orders` (each its own connection and limiter, from the
 * built packages), starts them all at one wall-clock instant once every one is connected, and
 * resolves their reports in the order of `orders`. A worker that exits early or does not report
 * in time fails the run; every worker is killed when it ends.
 *
 * @example
 * const reports = await runFleet(Array.from({ length: 4 }, () => ({ url, prefix, tier: 'tiered', … })));
 * const worst = worstWindow(reports.flatMap((r) => r.admittedAt), tokenBucketBound(100, 200, 1000));
 */
export async function runFleet(
  orders: readonly FleetOrders[],
  options: RunFleetOptions = {},
): Promise<FleetReport[]> {
  const graceMs = options.graceMs ?? 15_000;
  const children: ChildProcess[] = [];
  try {
    const ready: Promise<void>[] = [];
    const reports: Promise<FleetReport>[] = [];
    for (const order of orders) {
      // execArgv []: plain node, whatever loader runs this process (tsx, vitest).
      const child = fork(WORKER, [JSON.stringify(order)], {
        execArgv: [],
        stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
      });
      children.push(child);
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString()).slice(-4000);
      });
      const exited = new Promise<never>((_, reject) =>
        child.once('exit', (code, signal) =>
          reject(new Error(`fleet worker exited (${code ?? signal}) before reporting: ${stderr}`)),
        ),
      );
      exited.catch(() => {});
      const message = <T>(type: WorkerMessage['type'], pick: (m: WorkerMessage) => T) =>
        Promise.race([
          exited,
          new Promise<T>((resolve) =>
            child.on('message', (m: WorkerMessage) => m.type === type && resolve(pick(m))),
          ),
        ]);
      ready.push(message('ready', () => undefined));
      reports.push(message('report', (m) => (m as { report: FleetReport }).report));
    }
    await withTimeout(Promise.all(ready), READY_TIMEOUT_MS, 'fleet workers not ready');
    const delayMs = START_DELAY_MS + (options.idleBeforeMs ?? 0);
    const startAt = Date.now() + delayMs;
    for (const child of children) child.send({ type: 'start', startAt });
    options.onStart?.(startAt);
    const longest = Math.max(...orders.map((o) => o.durationMs));
    return await withTimeout(
      Promise.all(reports),
      delayMs + longest + graceMs,
      'fleet workers did not report',
    );
  } finally {
    for (const child of children)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${message} within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * The longest sync period any hosted limiter had in force during the run (`stats().syncPeriodMs`,
 * sampled every 5 ms and at the end; 0 without the sync): what a lease may borrow, the `T` of the
 * bound `C + r·(W + T)`. The period follows the live fleet and what a round costs (a call per 32
 * keys weighed), so a worker that held fewer keys by the end reported a shorter one then.
 */
export function syncPeriodOf(reports: readonly FleetReport[]): number {
  return Math.max(0, ...reports.map((report) => report.longestSyncPeriodMs));
}
