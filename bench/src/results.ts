import { readFileSync } from 'node:fs';
import { cpus, platform, release, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { AccuracyRow } from './accuracy.js';
import type { ClusterRow } from './cluster.js';
import type { ColdRow } from './cold.js';
import type { FleetRow } from './fleet-sim.js';
import { count, duration, markdownTable, percent, small, textTable, times } from './format.js';
import { type Health, type PolicyCount, PROBE_SLOW_MS, policyCell, policyMark } from './health.js';
import { IN_PROCESS_ONLY } from './keys.js';
import type { LoadRow } from './load.js';
import type { MicroRow } from './micro.js';
import { BUSY_ROW, IDLE_ROW, type NeighbourRow } from './neighbours.js';
import { type AnySection, type BenchSettings, grouped, type Named } from './section.js';
import type { ThroughputRow } from './throughput.js';
import { besidePeer, PEER } from './throughput-row.js';

/** Everything one run measured, as written to `latest.json`. */
export interface BenchResults {
  readonly generatedAt: string;
  readonly quick: boolean;
  readonly filter: string | null;
  readonly machine: Machine;
  readonly versions: Readonly<Record<string, string>>;
  readonly redis: { readonly version: string; readonly source: string; readonly description: string } | null;
  readonly settings: BenchSettings;
  /** The ratios a reader looks for first, in words. */
  readonly headline: readonly string[];
  /** Each section's rows, by section id (`micro`, `throughput`, `keys`, `cold`, `cluster`, `accuracy`, `fleet`, …). */
  readonly rows: Readonly<Record<string, readonly Named[]>>;
}

export interface Machine {
  readonly cpus: number;
  readonly cpuModel: string;
  readonly platform: string;
  readonly memoryGb: number;
  readonly node: string;
}

const BENCH_DIR = fileURLToPath(new URL('..', import.meta.url));
const PACKAGES = [
  '@tiered-limiter/core',
  '@tiered-limiter/local',
  '@tiered-limiter/redis',
  'ioredis',
  'rate-limiter-flexible',
  'tinybench',
  'hdr-histogram-js',
];

export function machine(): Machine {
  const all = cpus();
  return {
    cpus: all.length,
    cpuModel: all[0]?.model.trim() ?? 'unknown',
    platform: `${platform()} ${release()}`,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
  };
}

/** Versions of the libraries measured, read from the packages the bench loads. */
export function versions(): Record<string, string> {
  const found: Record<string, string> = {};
  for (const name of PACKAGES) {
    try {
      const pkg = JSON.parse(readFileSync(`${BENCH_DIR}node_modules/${name}/package.json`, 'utf8'));
      found[name] = String(pkg.version);
    } catch {
      found[name] = 'unknown';
    }
  }
  return found;
}

/** The fixed-load section's line: CPU per decision at the same offered load, and GC. */
function loadLines(rows: readonly LoadRow[]): string[] {
  const of = (limiter: string) => rows.find((r) => r.limiter === limiter);
  const tiered = of('TieredLimiter');
  const peer = of('RateLimiterRedis');
  if (tiered === undefined || peer === undefined) return [];
  const labels: [string, string][] = [
    ['TieredLimiter', 'two-tier'],
    ['TieredLimiter (optimistic)', 'optimistic'],
    ['RequestLimiter', 'per-request'],
    ['RateLimiterRedis', 'rate-limiter-flexible'],
  ];
  const cpu = labels.flatMap(([limiter, label]) => {
    const row = of(limiter);
    return row === undefined ? [] : [`${label} ${small(row.cpuUsPerDecision)} µs`];
  });
  const redisCpu = labels.flatMap(([limiter, label]) => {
    const row = of(limiter);
    return row === undefined ? [] : [`${label} ${small(row.redisCpuUsPerDecision)} µs`];
  });
  const gcMsPerS = (r: LoadRow) => small((r.gc.totalMs * 1000) / r.elapsedMs);
  return [
    `Fixed load, ${count(tiered.offeredPerSecond)} decisions/s on 100k Zipf keys, CPU per decision: ${cpu.join(', ')} ` +
      `(two-tier ${tiered.timesPeerCpu === null ? '—' : times(tiered.timesPeerCpu)} less); GC ${gcMsPerS(tiered)} ms/s ` +
      `two-tier, ${gcMsPerS(peer)} ms/s the peer; Redis's CPU per decision: ${redisCpu.join(', ')} ` +
      `(two-tier ${times(peer.redisCpuUsPerDecision / tiered.redisCpuUsPerDecision)} less)`,
  ];
}

/** The headline ratios, from whichever rows ran. */
export function headline(rows: Readonly<Record<string, readonly Named[]>>): string[] {
  const lines: string[] = [];
  const redisRows = (rows.throughput ?? []) as readonly ThroughputRow[];
  for (const row of redisRows) {
    if (row.limiter !== 'TieredLimiter' || row.keys !== 1 || row.timesPeer === null) continue;
    const inFlight = row.inFlight === 1 ? 'one at a time' : `${row.inFlight} in flight`;
    const peer = redisRows.find((r) => r.name === row.peer);
    const counts = (r: ThroughputRow) => `${count(r.allowed)} allowed, ${count(r.denied)} denied`;
    lines.push(
      `Two-tier hot key ÷ rate-limiter-flexible, ${row.limit}${row.ceiling ? ' (never denies: the ceiling)' : ''}, ` +
        `${inFlight}: ${times(row.timesPeer)}` +
        (row.ceiling || peer === undefined ? '' : ` (${counts(row)}; peer ${counts(peer)})`),
    );
  }
  for (const limit of new Set(redisRows.filter((r) => r.keys > 1).map((r) => r.limit))) {
    // The throughput section's per-key limit (the many-keys section has its own lines below).
    const of = (limiter: string) =>
      redisRows.find((r) => r.keys > 1 && r.limit === limit && r.limiter === limiter);
    const [tiered, request, peer] = [of('TieredLimiter'), of('RequestLimiter'), of(PEER)];
    if (tiered?.timesPeer == null || request?.timesPeer == null) continue;
    lines.push(
      `100k keys at ${limit}, ${tiered.inFlight} in flight, ÷ rate-limiter-flexible: two-tier ${times(tiered.timesPeer)}, ` +
        `per-request ${times(request.timesPeer)}; two-tier ${small(tiered.roundTripsPer1000)} Redis RT per 1,000 ` +
        `(${besidePeer(tiered, peer)})`,
    );
  }
  lines.push(...keysLines((rows.keys ?? []) as readonly ThroughputRow[]));
  lines.push(...fleetLines((rows.fleet ?? []) as readonly FleetRow[]));
  lines.push(...coldLines((rows.cold ?? []) as readonly ColdRow[]));
  lines.push(...clusterLines((rows.cluster ?? []) as readonly ClusterRow[]));
  lines.push(...loadLines((rows.load ?? []) as readonly LoadRow[]));
  lines.push(...neighbourLines(rows));
  lines.push(...accuracyLines((rows.accuracy ?? []) as readonly AccuracyRow[]));
  const micro = new Map(((rows.micro ?? []) as readonly MicroRow[]).map((r) => [r.name, r]));
  const lease = [...micro.values()].find((r) => r.name.startsWith('TieredLimiter · lease hit'));
  const bucket = micro.get('LocalLimiter · 1 hot key · ceiling');
  const clock = micro.get('baseline · performance.now()');
  if (lease && bucket && clock) {
    lines.push(
      `Lease hit ${duration(lease.nsPerOp)} = ${(lease.nsPerOp / bucket.nsPerOp).toFixed(2)}× a clock-reading ` +
        `LocalLimiter (${duration(bucket.nsPerOp)}); performance.now() alone ${duration(clock.nsPerOp)}`,
    );
  }
  lines.push(...policyLines(Object.values(rows).flat() as MarkedRow[]));
  return lines;
}

/** 100k keys: each limiter against the peer, and the exact two-tier limiter's Redis cost. */
function keysLines(rows: readonly ThroughputRow[]): string[] {
  const lines: string[] = [];
  for (const set of new Set(rows.map((r) => r.keySet))) {
    for (const inFlight of new Set(rows.map((r) => r.inFlight))) {
      const of = (limiter: string) =>
        rows.find((r) => r.keySet === set && r.inFlight === inFlight && r.limiter === limiter);
      const exact = of('TieredLimiter');
      const optimistic = of('TieredLimiter (optimistic)');
      const request = of('RequestLimiter');
      const inProcess = of(IN_PROCESS_ONLY);
      const peer = of(PEER);
      if (exact?.timesPeer == null) continue;
      const ratio = (r: ThroughputRow | undefined) => (r?.timesPeer == null ? '—' : times(r.timesPeer));
      lines.push(
        `${set === 'zipf' ? '100k keys Zipf' : '100k keys in turn'} at ${exact.limit}, ${inFlight} in flight, ` +
          `÷ rate-limiter-flexible: two-tier exact ${ratio(exact)}, optimistic ${ratio(optimistic)}, ` +
          `per-request ${ratio(request)}, in process and not shared (the ceiling) ${ratio(inProcess)}; ` +
          `exact ${small(exact.roundTripsPer1000)} Redis calls per 1,000 decisions, ` +
          `${small(exact.redisUsPerDecision)} Redis µs per decision, ` +
          `${small(exact.redisCpuUsPerDecision)} µs of Redis's CPU per decision ` +
          `(peer ${peer === undefined ? '—' : small(peer.redisCpuUsPerDecision)}), ` +
          `${exact.keyOpsPerCall === null ? '—' : small(exact.keyOpsPerCall)} key-ops per call ` +
          `(${besidePeer(exact, peer)})`,
      );
    }
  }
  return lines;
}

function fleetLines(rows: readonly FleetRow[]): string[] {
  return rows
    .filter((r) => r.limiter === 'TieredLimiter')
    .map((r) => {
      const perSecond = (n: number) => count((n * 1000) / r.measuredMs);
      const split =
        r.census === null
          ? ''
          : ` (sync ${perSecond(r.census.syncCalls)}, other ${perSecond(Math.max(0, r.roundTrips - r.census.syncCalls))}; ` +
            `out-of-band ops ${perSecond(r.census.outOfBand)}/s)`;
      return (
        `Fleet of ${r.instances} two-tier instances, 10 keys, 10,000 req/s: ${count(r.redisCallsPerSecond)} Redis ` +
        `calls/s${split}, ${r.timesFewerCalls === null ? '—' : times(r.timesFewerCalls)} fewer than per-request; ` +
        `${percent(r.storeWaits / Math.max(1, r.decisions), 2)} of decisions waited on the store; ` +
        `policy ${policyCell(r.policy, r.health)}`
      );
    });
}

function coldLines(rows: readonly ColdRow[]): string[] {
  if (rows.length === 0) return [];
  const cells = rows.map((r) => `${r.limiter} ${duration(r.p50Ns)} / ${duration(r.p99Ns)}`);
  return [`Cold key, first decision p50 / p99: ${cells.join('; ')}`];
}

function clusterLines(rows: readonly ClusterRow[]): string[] {
  const cluster = rows.filter((r) => r.topology === 'cluster' && r.timesOneMaster !== null);
  if (cluster.length === 0) return [];
  const cells = cluster.map((r) => `${r.limiter} ${times(r.timesOneMaster!)} (${count(r.opsPerSecond)}/s)`);
  return [`100k keys on a 3-master Cluster ÷ on 1 server: ${cells.join('; ')}`];
}

/** The probe's PING p99 idle and with every core busy, and each section's worst row against both. */
function neighbourLines(rows: Readonly<Record<string, readonly Named[]>>): string[] {
  const references = (rows.neighbours ?? []) as readonly NeighbourRow[];
  const idle = references.find((r) => r.name === IDLE_ROW)?.health.probe;
  if (idle === undefined || idle === null) return [];
  const busy = references.find((r) => r.name === BUSY_ROW)?.health.probe ?? undefined;
  const against = (p99: number) =>
    times(p99 / Math.max(idle.p99Ms, 1e-3)) +
    (busy === undefined ? '' : `, ${times(p99 / Math.max(busy.p99Ms, 1e-3))} busy`);
  const cells: string[] = [];
  for (const [section, list] of Object.entries(rows)) {
    let worst: { name: string; p99: number } | undefined;
    for (const row of list as readonly (Named & { health?: Health })[]) {
      const p99 = row.health?.probe?.p99Ms;
      if (section !== 'neighbours' && p99 !== undefined && (worst === undefined || p99 > worst.p99))
        worst = { name: row.name, p99 };
    }
    if (worst !== undefined)
      cells.push(`${section} ${duration(worst.p99 * 1e6)} (${against(worst.p99)}, ${worst.name})`);
  }
  if (cells.length === 0) return [];
  const busyText =
    busy === undefined ? '' : `, ${duration(busy.p99Ms * 1e6)} with every core busy and no Redis traffic`;
  return [
    `Other Redis users: PING p99 ${duration(idle.p99Ms * 1e6)} idle${busyText}; the worst row of each section, × idle${busy === undefined ? '' : ' and × busy'}: ${cells.join('; ')}`,
  ];
}

function accuracyLines(rows: readonly AccuracyRow[]): string[] {
  const checked = rows.filter((r) => r.window !== null);
  if (checked.length === 0) return [];
  const over = checked.filter((r) => r.window!.excess > 0);
  const hot = checked.map((r) => `${r.name.split(',')[0]} ${percent(r.allowedOfIdeal)}`);
  return [
    over.length === 0
      ? `Accuracy: no window of any key over the bound of its mode in ${checked.length} rows; hot key ÷ ideal: ${hot.join('; ')}`
      : `✗ Accuracy: windows over the bound in ${over.map((r) => r.name).join('; ')}`,
  ];
}

export function machineLine(results: BenchResults): string {
  const m = results.machine;
  const v = results.versions;
  return (
    `${m.cpus} × ${m.cpuModel}, ${m.memoryGb} GB, ${m.platform}; Node ${m.node}; Redis ${results.redis?.version ?? '—'}; ` +
    `tiered-limiter ${v['@tiered-limiter/redis']}, ioredis ${v.ioredis}, rate-limiter-flexible ${v['rate-limiter-flexible']}, ` +
    `tinybench ${v.tinybench}`
  );
}

/** One section's tables, one per group, drawn by `table`. */
function sectionTables(
  section: AnySection,
  rows: readonly Named[],
  table: (header: string[], lines: string[][]) => string,
  groupTitle: (title: string) => string,
): string[] {
  // Every table starts with the task's name.
  const header = ['task', ...section.columns.map((c) => c.title)];
  return grouped(section, rows).flatMap(([group, members]) => [
    ...(group ? [groupTitle(group)] : []),
    table(
      header,
      members.map((row) => [row.name, ...section.columns.map((c) => c.cell(row))]),
    ),
    '',
  ]);
}

/** The tables for the terminal. */
export function terminalReport(results: BenchResults, sections: readonly AnySection[]): string {
  const parts = [`${results.quick ? 'Quick' : 'Full'} run · ${machineLine(results)}`, ''];
  for (const section of sections) {
    const rows = results.rows[section.id];
    if (!rows?.length) continue;
    parts.push(`${section.title}`, '', ...sectionTables(section, rows, textTable, (g) => `  ${g}`));
  }
  parts.push('Headline', ...results.headline.map((line) => `- ${line}`));
  return parts.join('\n');
}

/** `latest.md`. */
export function markdownReport(
  results: BenchResults,
  sections: readonly AnySection[],
  chartFile: string | undefined,
): string {
  const parts = [
    '# `pnpm bench` results',
    '',
    `${results.quick ? 'A quick run (`--quick`): short, rough numbers.' : 'One full run of `pnpm bench`.'} ` +
      `${results.generatedAt}. ${machineLine(results)}. Redis: ${results.redis?.description ?? 'not used'}.`,
    '',
    'Absolute numbers move with the machine, and on a shared 2-core machine from run to run; read the ratios, ' +
      'which come from one run on one Redis.',
    '',
    '## Headline',
    '',
    ...results.headline.map((line) => `- ${line}`),
  ];
  if (chartFile)
    parts.push('', `![Decisions per second at each limit, and Redis calls as the fleet grows](${chartFile})`);
  for (const section of sections) {
    const rows = results.rows[section.id];
    if (!rows?.length) continue;
    parts.push('', `## ${section.title}`, '');
    parts.push(...sectionTables(section, rows, markdownTable, (g) => `**${g}**\n`));
    parts.push(...section.notes(results.settings).map((note: string) => `- ${note}`));
  }
  return `${parts.join('\n')}\n`;
}

/** A row as the headline's policy lines read it: any section's. */
type MarkedRow = { readonly name: string; readonly policy?: PolicyCount | null; readonly health?: Health };

/**
 * The headline's word on failure-policy decisions while Redis answered every probe: the rows
 * where it was the deciding process's own doing (⚠, a missed target), and apart, the rows where
 * the probe saw Redis slower than the store timeout (⧗, the policy doing as declared).
 */
export function policyLines(rows: readonly MarkedRow[]): string[] {
  const marked = (mark: 'own' | 'slow') =>
    rows.filter((r) => r.health !== undefined && policyMark(r.policy ?? null, r.health) === mark);
  const own = marked('own');
  const slow = marked('slow');
  if (own.length === 0 && slow.length === 0) return ['No failure-policy decision while Redis was healthy.'];
  const lines: string[] = [];
  if (slow.length > 0) {
    lines.push(
      `⧗ Failure-policy decisions while Redis answered every probe, some PINGs slower than the ${PROBE_SLOW_MS} ms ` +
        `store timeout, in ${slow.length} row(s): ` +
        slow.map((r) => `${r.name} (${count(r.health!.probe!.slow ?? 0)} slow PINGs)`).join('; '),
    );
  }
  lines.push(
    own.length === 0
      ? `No failure-policy decision while Redis answered every probe within the ${PROBE_SLOW_MS} ms store timeout.`
      : `⚠ Failure-policy decisions while Redis answered every probe within the ${PROBE_SLOW_MS} ms store timeout ` +
          `in ${own.length} row(s): ${own.map((r) => r.name).join('; ')}`,
  );
  return lines;
}
