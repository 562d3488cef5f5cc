import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { Bench, type Task } from 'tinybench';
import { registerBaseline } from './baseline.js';
import { registerLocal } from './local.js';
import { type AddTask, type Suite, sink } from './suite.js';

/** Every file of tasks, in the order they run. A new tier adds its file here. */
const SUITES: readonly Suite[] = [registerBaseline, registerLocal];

const BASELINE = 'baseline · no limiter';

const USAGE = `Usage: pnpm bench [--quick] [--filter <substring>] [--json]

  --quick               short runs (about 0.1 s a task): checks the bench works, numbers are rough
  --filter <substring>  only the tasks whose name contains it (the baseline always runs)
  --json                print the results as JSON instead of a table`;

interface Row {
  name: string;
  opsPerSecond: number;
  meanNs: number;
  p99Ns: number;
  samples: number;
  /** Mean time over the baseline's, when the baseline ran. */
  timesBaseline: number | undefined;
}

function parseFlags(): { quick: boolean; filter: string | undefined; json: boolean } {
  try {
    const { values } = parseArgs({
      options: {
        quick: { type: 'boolean', default: false },
        filter: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
      strict: true,
    });
    if (values.help) {
      console.log(USAGE);
      process.exit(0);
    }
    return { quick: values.quick, filter: values.filter, json: values.json };
  } catch (err) {
    console.error(`${(err as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
}

function toRow(task: Task): Row | undefined {
  const result = task.result;
  if (result.state === 'errored') throw result.error;
  if (result.state !== 'completed') return undefined;
  const meanNs = result.latency.mean * 1e6;
  return {
    name: task.name,
    // From the mean latency, not tinybench's mean of per-sample rates, which a few samples
    // that read as 0 ns skew upward.
    opsPerSecond: 1e9 / meanNs,
    meanNs,
    p99Ns: result.latency.p99 * 1e6,
    samples: result.latency.samplesCount,
    timesBaseline: undefined,
  };
}

function printTable(rows: readonly Row[]): void {
  const header = ['task', 'ops/s', 'mean ns', 'p99 ns', '× baseline'];
  const lines = rows.map((row) => [
    row.name,
    Math.round(row.opsPerSecond).toLocaleString('en-US'),
    row.meanNs.toFixed(1),
    row.p99Ns.toFixed(0),
    row.timesBaseline === undefined ? '—' : row.timesBaseline.toFixed(2),
  ]);
  const widths = header.map((title, i) => Math.max(title.length, ...lines.map((line) => line[i]!.length)));
  const format = (cells: readonly string[]) =>
    cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ');
  console.log(format(header));
  console.log(widths.map((w) => '─'.repeat(w)).join('  '));
  for (const line of lines) console.log(format(line));
}

async function main(): Promise<void> {
  const { quick, filter, json } = parseFlags();
  const bench = new Bench(
    quick ? { time: 100, warmupTime: 20, iterations: 64 } : { time: 2000, warmupTime: 500, iterations: 64 },
  );
  const add: AddTask = (name, fn, options) => {
    if (filter === undefined || name === BASELINE || name.includes(filter)) bench.add(name, fn, options);
  };
  const cleanups: (() => unknown)[] = [];
  try {
    for (const suite of SUITES) {
      const cleanup = await suite(add);
      if (typeof cleanup === 'function') cleanups.push(cleanup as () => unknown);
    }
    if (bench.tasks.length <= 1 && filter !== undefined) {
      console.error(`No task matches --filter ${JSON.stringify(filter)}.`);
      process.exitCode = 2;
      return;
    }
    if (!json) {
      console.log(
        `tinybench, ${quick ? 'quick' : 'full'} run · Node ${process.version} · ${cpus()[0]?.model ?? 'unknown CPU'}\n`,
      );
    }
    await bench.run();
  } finally {
    for (const cleanup of cleanups) await cleanup();
  }

  const rows = bench.tasks.map(toRow).filter((row): row is Row => row !== undefined);
  const baseline = rows.find((row) => row.name === BASELINE);
  for (const row of rows) row.timesBaseline = baseline ? row.meanNs / baseline.meanNs : undefined;
  if (json) console.log(JSON.stringify({ quick, node: process.version, rows }, null, 2));
  else printTable(rows);
  // Reading the sink keeps every task's result alive to the end.
  if (sink.value === Symbol.for('never')) console.log('');
}

await main();
