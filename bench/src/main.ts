import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chartSvg } from './chart.js';
import { parseFlags } from './flags.js';
import { count } from './format.js';
import { type BenchRedis, NoRedisError, openRedis } from './redis-target.js';
import { type BenchResults, headline, machine, markdownReport, terminalReport, versions } from './results.js';
import { measureApart } from './row-process.js';
import { type AnySection, benchSettings, type Named, type Task } from './section.js';
import { loadSections } from './sections.js';

const RESULTS_DIR = fileURLToPath(new URL('../results/', import.meta.url));

// A signal ends Node without its 'exit' event, and so without the harness's net that stops the
// redis-server this run started and removes its directory: a SIGINT to this process alone (not its
// process group, as a terminal's Ctrl-C is) left that server running, orphaned. Exiting on the
// signal runs that net; keys left on a REDIS_URL server expire by their TTLs.
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
  ['SIGHUP', 129],
] as const) {
  process.once(signal, () => process.exit(code));
}

const flags = parseFlags();
const SECTIONS = await loadSections();
const settings = benchSettings(flags.quick, flags.processes);
const progress = (line: string) => process.stderr.write(`${line}\n`);

/** A section's tasks that `--filter` selects, with the rows they are read against. */
function pick(section: AnySection): Task[] {
  const all: Task[] = [...section.tasks(settings)];
  const { filter } = flags;
  if (filter === undefined) return all;
  const chosen = new Set(all.filter((t) => t.name.includes(filter)).map((t) => t.name));
  if (chosen.size > 0 && section.baseline !== undefined) chosen.add(section.baseline);
  for (const task of all) if (chosen.has(task.name) && task.peer !== undefined) chosen.add(task.peer);
  return all.filter((t) => chosen.has(t.name));
}

async function open(): Promise<BenchRedis | undefined> {
  try {
    return await openRedis();
  } catch (error) {
    if (!(error instanceof NoRedisError)) throw error;
    console.error(`pnpm bench: ${error.message}`);
    process.exitCode = 1;
    return undefined;
  }
}

async function main(): Promise<void> {
  const plan = SECTIONS.map((section) => ({ section, tasks: pick(section) })).filter(
    (p) => p.tasks.length > 0,
  );
  const total = plan.reduce((sum, p) => sum + p.tasks.length, 0);
  if (total === 0) {
    console.error(`No task matches --filter ${JSON.stringify(flags.filter)}.`);
    process.exitCode = 2;
    return;
  }
  const target = plan.some((p) => p.section.usesRedis) ? await open() : undefined;
  if (target === undefined && plan.some((p) => p.section.usesRedis)) return;
  if (target) progress(`Redis: ${target.description}.`);
  progress(`${flags.quick ? 'Quick' : 'Full'} run: ${total} tasks.`);

  const rows: Record<string, Named[]> = {};
  const started = performance.now();
  let done = 0;
  try {
    for (const { section, tasks } of plan) {
      const measured: Named[] = [];
      rows[section.id] = measured;
      const named = tasks.map((task, i) => ({
        name: task.name,
        prefix: `${target?.prefix ?? 'bench'}:${section.id}${i}`,
      }));
      // A full run measures each row in a process of its own; a quick run each section in one.
      const batches = flags.quick ? [named] : named.map((task) => [task]);
      for (const batch of batches) {
        const url = section.usesRedis ? target?.url : undefined;
        await measureApart({ section: section.id, tasks: batch, settings, url }, target?.probe, (row) => {
          measured.push(row);
          progress(`[${String(++done).padStart(String(total).length)}/${total}] ${section.progress(row)}`);
        });
        // A row leaves up to 100,000 keys that expire over the next seconds, in the next row: Redis's
        // expiry cycle then blocks every client up to 25 ms at a time, a cost of the row before.
        // Each row meets its own keys' expiry, not another's.
        if (url !== undefined && target !== undefined) await target.cleanup();
      }
      section.finish?.(measured);
    }
  } finally {
    if (target) {
      try {
        progress(`Deleted this run's ${count(await target.cleanup())} keys (${target.prefix}*).`);
      } finally {
        await target.stop();
      }
    }
  }
  progress(`Done in ${((performance.now() - started) / 1000).toFixed(1)} s.`);

  const results: BenchResults = {
    generatedAt: new Date().toISOString(),
    quick: flags.quick,
    filter: flags.filter ?? null,
    machine: machine(),
    versions: versions(),
    redis: target
      ? { version: target.version, source: target.source, description: target.description }
      : null,
    settings,
    headline: headline(rows),
    rows,
  };
  if (flags.json) console.log(JSON.stringify(results, null, 2));
  else console.log(`\n${terminalReport(results, SECTIONS)}`);

  const outDir =
    flags.out !== undefined
      ? resolve(flags.out)
      : !flags.quick && flags.filter === undefined
        ? RESULTS_DIR
        : undefined;
  if (outDir === undefined) {
    progress('Results not written (a quick or filtered run): pass --out <dir> to write them.');
    return;
  }
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(outDir, 'latest.svg'), chartSvg(results));
  writeFileSync(join(outDir, 'latest.md'), markdownReport(results, SECTIONS, 'latest.svg'));
  progress(`Wrote latest.md, latest.json and latest.svg in ${relative(process.cwd(), outDir) || '.'}/`);
}

await main();
