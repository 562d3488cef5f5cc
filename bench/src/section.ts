import type { RowRedis } from './redis-target.js';

/** How long and how hard each part runs: one set for `--quick`, one for a full run. */
export interface BenchSettings {
  readonly quick: boolean;
  /** tinybench: time and warm-up per task, ms. */
  readonly microMs: number;
  readonly microWarmupMs: number;
  /** Hand-written loop against Redis: warm-up and timed part per row, ms; decisions at most. */
  readonly warmupMs: number;
  readonly measureMs: number;
  readonly maxDecisions: number;
  readonly accuracyMs: number;
  readonly processes: number;
  readonly fleetWarmupMs: number;
  readonly fleetMs: number;
}

export function benchSettings(quick: boolean, processes: number): BenchSettings {
  return {
    quick,
    microMs: quick ? 100 : 1000,
    microWarmupMs: quick ? 20 : 200,
    warmupMs: quick ? 40 : 500,
    measureMs: quick ? 120 : 2000,
    maxDecisions: quick ? 5_000_000 : 100_000_000,
    accuracyMs: quick ? 800 : 3000,
    processes,
    // At 200 instances a sync period is 1 s: warm up over a few periods before counting.
    fleetWarmupMs: quick ? 1200 : 3000,
    fleetMs: quick ? 800 : 5000,
  };
}

/** What a task is given to run. */
export interface RunContext {
  readonly settings: BenchSettings;
  /** The run's Redis, for sections that use it. */
  readonly target: RowRedis | undefined;
  /** A key prefix of this task's own, under the run's prefix. */
  readonly prefix: string;
}

/** One column of a table: its title and how a row shows in it. */
export interface Column<R> {
  readonly title: string;
  readonly cell: (row: R) => string;
}

export interface Named {
  readonly name: string;
}

/** A task, and the row its ratio is taken against (`--filter` brings that row along). */
export interface Task extends Named {
  readonly peer?: string;
}

/**
 * One part of `pnpm bench`: its tasks, how to measure one, and how its rows show. A new kind of
 * row (a fleet-scale row, a Cluster row) is a new section in `main.ts`'s list; the reports,
 * `--filter` and `latest.json` take it from there.
 */
export interface Section<T extends Task, R extends Named> {
  /** Key of its rows in `latest.json`. */
  readonly id: string;
  readonly title: string;
  readonly usesRedis: boolean;
  tasks(settings: BenchSettings): readonly T[];
  /** A row every filtered run of this section keeps beside its chosen rows, so their ratios can be read. */
  readonly baseline?: string;
  measure(task: T, context: RunContext): Promise<R>;
  /** One line on stderr once a row is measured. */
  progress(row: R): string;
  /** The table's columns after the first, which is always the task's name. */
  readonly columns: readonly Column<R>[];
  /** Rows show in one table per group, titled by it (e.g. the limit); one table when absent. */
  group?(row: R): string;
  /** After every row ran: fills in what needs other rows (ratios to peers). */
  finish?(rows: R[]): void;
  /** Bullets under its tables in `latest.md`: how it was measured. */
  notes(settings: BenchSettings): readonly string[];
}

// biome-ignore lint/suspicious/noExplicitAny: a list of sections of different row types
export type AnySection = Section<any, any>;

/** Rows in their groups, in first-seen order. */
export function grouped<R extends Named>(section: Section<Task, R>, rows: readonly R[]): [string, R[]][] {
  const groups = new Map<string, R[]>();
  for (const row of rows) {
    const key = section.group?.(row) ?? '';
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  return [...groups];
}
