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

/**
 * The PING latency of the probe (another client, in a process of its own) over a stretch when the
 * bench runs nothing: the reference every row's `other client p99` is read against.
 */
async function measureIdle(_task: { name: string }, context: RunContext): Promise<NeighbourRow> {
  const { target, settings } = context;
  if (target === undefined) throw new Error('the idle probe needs Redis');
  const watch = watchHealth(target.probe);
  const started = performance.now();
  await sleep(settings.measureMs);
  const ms = performance.now() - started;
  return { name: IDLE_ROW, ms, health: await watch.stop() };
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
  tasks: () => [{ name: IDLE_ROW }],
  measure: measureIdle,
  progress: (row) => `${row.name}: PING p99 ${probeMs(row, (p) => p.p99Ms)}`,
  columns: COLUMNS,
  notes: (s: BenchSettings) => [
    `The probe (a PING every ${PROBE_EVERY_MS} ms on its own connection, from a process of its own) over ` +
      `${count(s.measureMs)} ms while the bench runs nothing: the reference for every row's **other client p99**, ` +
      'which the same probe measures while that row runs. The headline gives the worst row against it.',
  ],
};
