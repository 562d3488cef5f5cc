import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { availableParallelism } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { count, duration } from './format.js';
import { type Health, PROBE_EVERY_MS, watchHealth } from './health.js';
import type { BenchSettings, Column, RunContext, Section } from './section.js';

/** What another client of the server sees with nothing of the bench running. */
export interface NeighbourRow {
  readonly name: string;
  readonly ms: number;
  readonly health: Health;
}

export const IDLE_ROW = 'other client · idle (nothing of the bench running)';
export const BUSY_ROW = 'other client · every core busy (spinning processes, no Redis traffic)';

/**
 * The PING latency of the probe (another client, in a process of its own) over a stretch when the
 * bench runs nothing: the reference every row's `other client p99` is read against. And over a
 * stretch when a process per core spins and nothing talks to Redis: what the probe's p99 owes to
 * the CPU alone, as every row keeps both cores busy (the bench's process and Redis).
 */
async function measureNeighbours(task: { name: string }, context: RunContext): Promise<NeighbourRow> {
  const { target, settings } = context;
  if (target === undefined) throw new Error('the idle probe needs Redis');
  const spinners = task.name === BUSY_ROW ? spin(settings.measureMs + 1_000) : [];
  const watch = watchHealth(target.probe);
  const started = performance.now();
  await sleep(settings.measureMs);
  const ms = performance.now() - started;
  const health = await watch.stop();
  for (const child of spinners) child.kill();
  await Promise.all(spinners.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)));
  return { name: task.name, ms, health };
}

/** A process per core, each spinning for at most `ms`. */
function spin(ms: number) {
  const code = `const end = Date.now() + ${ms}; while (Date.now() < end);`;
  return Array.from({ length: availableParallelism() }, () =>
    spawn(process.execPath, ['-e', code], { stdio: 'ignore' }),
  );
}

const probeMs = (row: NeighbourRow, pick: (p: NonNullable<Health['probe']>) => number) =>
  row.health.probe === null ? '—' : duration(pick(row.health.probe) * 1e6);

const COLUMNS: readonly Column<NeighbourRow>[] = [
  { title: 'PINGs', cell: (r) => count(r.health.probe?.sent ?? 0) },
  { title: 'p50', cell: (r) => probeMs(r, (p) => p.p50Ms) },
  { title: 'p99', cell: (r) => probeMs(r, (p) => p.p99Ms) },
  { title: 'max', cell: (r) => probeMs(r, (p) => p.maxMs) },
];

export const neighboursSection: Section<{ name: string }, NeighbourRow> = {
  id: 'neighbours',
  title: 'Other Redis users: PING latency of another client with the bench idle',
  usesRedis: true,
  tasks: () => [{ name: IDLE_ROW }, { name: BUSY_ROW }],
  measure: measureNeighbours,
  progress: (row) => `${row.name}: PING p99 ${probeMs(row, (p) => p.p99Ms)}`,
  columns: COLUMNS,
  notes: (s: BenchSettings) => [
    `The probe (a PING every ${PROBE_EVERY_MS} ms on its own connection, from a process of its own) over ` +
      `${count(s.measureMs)} ms while the bench runs nothing: the reference for every row's **other client p99**, ` +
      'which the same probe measures while that row runs. The headline gives the worst row against it.',
    `**every core busy**: the same, while a process per core spins (${availableParallelism()} here) and nothing ` +
      'talks to Redis: what the probe waits for a core alone. Every row keeps the cores busy too (the ' +
      "bench's process and Redis), so a row's p99 against this one is what its Redis traffic added.",
  ],
};
