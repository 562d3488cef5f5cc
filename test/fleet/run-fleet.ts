import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const WORKER = fileURLToPath(new URL('./worker.mjs', import.meta.url));

/** What one worker was told to do (see worker.mjs). */
export interface WorkerOrders {
  url: string;
  prefix: string;
  key: string;
  tier: 'tiered' | 'request';
  capacity: number;
  refillPerSecond: number;
  instances: number;
  durationMs: number;
  maxDecisions: number;
  startAt?: number;
  requestsPerSecond?: number;
  concurrency?: number;
  lease?: { ttlMs?: number };
}

/** What one worker reports. */
export interface WorkerReport {
  decisions: number;
  admittedAt: number[];
  lateMs: number;
  stats: { roundTrips?: number; tokensLeased?: number; tokensRefunded?: number; [k: string]: unknown };
}

/**
 * Runs one worker process per entry of `orders`, all starting at the same wall-clock instant,
 * and collects their reports. A worker that does not finish within its duration plus
 * `graceMs` is killed and fails the run.
 */
export async function runFleet(orders: WorkerOrders[], graceMs = 15_000): Promise<WorkerReport[]> {
  const startAt = Date.now() + 1500; // time for every worker to start and connect
  return Promise.all(
    orders.map(
      (o) =>
        new Promise<WorkerReport>((resolve, reject) => {
          const child = spawn(process.execPath, [WORKER, JSON.stringify({ ...o, startAt })], {
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          let out = '';
          let err = '';
          child.stdout.on('data', (chunk) => {
            out += chunk;
          });
          child.stderr.on('data', (chunk) => {
            err += chunk;
          });
          const killer = setTimeout(() => child.kill('SIGKILL'), 1500 + o.durationMs + graceMs);
          child.on('exit', (code) => {
            clearTimeout(killer);
            if (code !== 0) return reject(new Error(`fleet worker exited with ${code}: ${err}`));
            try {
              resolve(JSON.parse(out.trim().split('\n').pop()!) as WorkerReport);
            } catch (error) {
              reject(new Error(`fleet worker printed no report: ${out} ${err}`, { cause: error }));
            }
          });
        }),
    ),
  );
}

/**
 * The most admitted in any window, less what the bound allows for that window:
 * `admitted − (capacity + rate × (window + ttl))`, maximised over all windows. ≤ 0 means the
 * bound held everywhere. `stampSlackMs` widens each window for the delay between a decision
 * and the `Date.now()` that stamped it.
 */
export function worstWindowExcess(
  stamps: number[],
  capacity: number,
  ratePerSecond: number,
  ttlMs: number,
  stampSlackMs: number,
): { excess: number; windowMs: number; admitted: number } {
  const sorted = [...stamps].sort((a, b) => a - b);
  let worst = { excess: Number.NEGATIVE_INFINITY, windowMs: 0, admitted: 0 };
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i; j < sorted.length; j++) {
      const windowMs = sorted[j]! - sorted[i]!;
      const admitted = j - i + 1;
      const excess = admitted - (capacity + (ratePerSecond * (windowMs + ttlMs + stampSlackMs)) / 1000);
      if (excess > worst.excess) worst = { excess, windowMs, admitted };
    }
  }
  return worst;
}

/** Calls of the scripts as Redis itself counted them (`INFO commandstats`). */
export function scriptCalls(info: string): number {
  let calls = 0;
  for (const match of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(match[1]);
  return calls;
}
