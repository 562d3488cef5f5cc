import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const WORKER = fileURLToPath(new URL('./scenario-worker.mjs', import.meta.url));

/** One step of a scripted instance (see scenario-worker.mjs). */
export type ScenarioStep =
  | { at: number; do: 'consume'; count: number }
  | { at: number; do: 'hammer'; forMs: number }
  | { at: number; do: 'block'; forMs: number; thenRequests?: number };

/** One instance's orders: its limiter options and its steps. */
export interface ScenarioInstance {
  options: Record<string, unknown>;
  steps: ScenarioStep[];
}

/** What one instance reports. */
export interface ScenarioReport {
  admittedAt: number[];
  decisions: number;
  tiers: Record<string, number>;
  stats: Record<string, unknown>;
}

/**
 * Runs one process per instance, each with its own connection to `url`, all timed from one
 * wall-clock start (the clock every process on a machine shares), and collects their reports.
 */
export async function runScenario(
  shared: { url: string; prefix: string; key: string; capacity: number; refillPerSecond: number },
  instances: ScenarioInstance[],
  graceMs = 20_000,
): Promise<ScenarioReport[]> {
  const startAt = Date.now() + 2500; // time for every process to start and connect, on a busy machine
  return Promise.all(
    instances.map(
      (instance) =>
        new Promise<ScenarioReport>((resolve, reject) => {
          const orders = JSON.stringify({ ...shared, ...instance, startAt });
          const child = spawn(process.execPath, [WORKER, orders], { stdio: ['ignore', 'pipe', 'pipe'] });
          let out = '';
          let err = '';
          child.stdout.on('data', (chunk) => {
            out += chunk;
          });
          child.stderr.on('data', (chunk) => {
            err += chunk;
          });
          const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
          child.on('exit', (code) => {
            clearTimeout(killer);
            if (code !== 0) return reject(new Error(`scenario worker exited with ${code}: ${err}`));
            try {
              resolve(JSON.parse(out.trim().split('\n').pop()!) as ScenarioReport);
            } catch (error) {
              reject(new Error(`scenario worker printed no report: ${out} ${err}`, { cause: error }));
            }
          });
        }),
    ),
  );
}
