import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ACCURACY_TIERS, type AccuracyRow, accuracyName, measureAccuracy } from './accuracy.js';
import { chartSvg } from './chart.js';
import { parseFlags } from './flags.js';
import {
  FLEET_KEYS,
  FLEET_RATE,
  FLEET_SIZES,
  FLEET_TIERS,
  type FleetRow,
  fleetName,
  measureFleet,
} from './fleet-sim.js';
import { count, duration, small } from './format.js';
import { type BenchRedis, NoRedisError, openRedis } from './redis-target.js';
import {
  type BenchResults,
  type BenchSettings,
  machine,
  markdownReport,
  terminalReport,
  versions,
} from './results.js';
import {
  BASELINE,
  measureThroughput,
  relateToPeers,
  type ThroughputRow,
  type ThroughputTask,
  throughputTasks,
} from './throughput.js';

const RESULTS_DIR = fileURLToPath(new URL('../results/', import.meta.url));

const flags = parseFlags();
const { quick, filter } = flags;
const settings: BenchSettings = {
  warmupMs: quick ? 40 : 500,
  measureMs: quick ? 120 : 2000,
  maxDecisions: quick ? 5_000_000 : 100_000_000,
  accuracyMs: quick ? 800 : 3000,
  processes: flags.processes,
  fleetWarmupMs: quick ? 200 : 1000,
  fleetMs: quick ? 400 : 3000,
  fleetKeys: FLEET_KEYS,
  fleetRate: FLEET_RATE,
};

const progress = (line: string) => process.stderr.write(`${line}\n`);
const selected = (name: string) => filter === undefined || name.includes(filter);

function pickThroughput(): ThroughputTask[] {
  const all = throughputTasks();
  const chosen = new Set(all.filter((t) => selected(t.name)).map((t) => t.name));
  // A chosen row brings its peer, and any row brings the baseline, so every ratio can be read.
  if (chosen.size > 0) chosen.add(BASELINE);
  for (const t of all) if (chosen.has(t.name) && t.peer !== undefined) chosen.add(t.peer);
  return all.filter((t) => chosen.has(t.name));
}

async function main(): Promise<void> {
  const throughput = pickThroughput();
  const accuracy = ACCURACY_TIERS.filter((t) => selected(accuracyName(t.limiter, flags.processes)));
  const fleet = FLEET_SIZES.flatMap((instances) =>
    FLEET_TIERS.filter((t) => selected(fleetName(t.limiter, instances))).map((t) => ({ ...t, instances })),
  );
  const total = throughput.length + accuracy.length + fleet.length;
  if (total === 0) {
    console.error(`No task matches --filter ${JSON.stringify(filter)}.`);
    process.exitCode = 2;
    return;
  }

  let target: BenchRedis;
  try {
    target = await openRedis();
  } catch (error) {
    if (error instanceof NoRedisError) {
      console.error(`pnpm bench: ${error.message}`);
      process.exitCode = 1;
      return;
    }
    throw error;
  }
  progress(`Redis: ${target.description}.`);
  progress(`${quick ? 'Quick' : 'Full'} run: ${total} tasks.`);

  const rows: ThroughputRow[] = [];
  const accuracyRows: AccuracyRow[] = [];
  const fleetRows: FleetRow[] = [];
  const started = performance.now();
  let done = 0;
  const step = () => `[${String(++done).padStart(String(total).length)}/${total}]`;
  try {
    const warmup = { maxMs: settings.warmupMs, maxDecisions: settings.maxDecisions };
    const bounds = { maxMs: settings.measureMs, maxDecisions: settings.maxDecisions };
    for (const [i, task] of throughput.entries()) {
      (globalThis as { gc?: () => void }).gc?.();
      const row = await measureThroughput(task, target, `${target.prefix}:t${i}`, warmup, bounds);
      rows.push(row);
      const trips =
        row.roundTripsPer1000 === null ? '' : `, ${small(row.roundTripsPer1000)} Redis round trips per 1,000`;
      const fell = row.fallbacks
        ? ` (${count(row.fallbacks)} decisions by the failure policy: store timeouts)`
        : '';
      progress(
        `${step()} ${row.name}: ${count(row.opsPerSecond)} ops/s, p99 ${duration(row.p99Ns)}${trips}${fell}`,
      );
    }
    for (const { tier, limiter } of accuracy) {
      const row = await measureAccuracy(
        target,
        `${target.prefix}:a-${tier}`,
        tier,
        limiter,
        flags.processes,
        settings.accuracyMs,
      );
      accuracyRows.push(row);
      progress(
        `${step()} ${row.name}: admitted ${count(row.admitted)} of ideal ${count(row.ideal)}, ` +
          `${small(row.roundTripsPer1000)} Redis round trips per 1,000 decisions`,
      );
    }
    for (const { tier, limiter, instances } of fleet) {
      const row = await measureFleet(
        target,
        `${target.prefix}:f-${tier}-${instances}`,
        tier,
        limiter,
        instances,
        settings.fleetWarmupMs,
        settings.fleetMs,
      );
      fleetRows.push(row);
      progress(`${step()} ${row.name}: ${count(row.redisCallsPerSecond)} Redis ops/s`);
    }
  } finally {
    try {
      const deleted = await target.cleanup();
      progress(`Deleted this run's ${count(deleted)} keys (${target.prefix}*).`);
    } finally {
      await target.stop();
    }
  }
  relateToPeers(rows);
  progress(`Done in ${((performance.now() - started) / 1000).toFixed(1)} s.`);

  const results: BenchResults = {
    generatedAt: new Date().toISOString(),
    quick,
    filter: filter ?? null,
    machine: machine(),
    versions: versions(),
    redis: { version: target.version, source: target.source, description: target.description },
    settings,
    throughput: rows,
    accuracy: accuracyRows,
    fleet: fleetRows,
  };
  if (flags.json) console.log(JSON.stringify(results, null, 2));
  else console.log(`\n${terminalReport(results)}`);

  const outDir =
    flags.out !== undefined ? resolve(flags.out) : !quick && filter === undefined ? RESULTS_DIR : undefined;
  if (outDir === undefined) {
    progress('Results not written (a quick or filtered run): pass --out <dir> to write them.');
    return;
  }
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(outDir, 'latest.svg'), chartSvg(results));
  writeFileSync(join(outDir, 'latest.md'), markdownReport(results, 'latest.svg'));
  progress(`Wrote latest.md, latest.json and latest.svg in ${relative(process.cwd(), outDir) || '.'}/`);
}

await main();
