import type { AccuracyRow } from './accuracy.js';
import type { FleetRow } from './fleet-sim.js';
import { count, percent, small } from './format.js';
import type { BenchResults } from './results.js';
import type { ThroughputRow } from './throughput.js';

/**
 * `latest.svg`: plain SVG text, no browser and no library. Three panels of horizontal bars:
 * Redis round trips per 1,000 decisions (log scale), admitted / ideal under a fleet, and Redis
 * operations per second as a simulated fleet grows.
 */

const WIDTH = 960;
const LABEL_W = 250;
const PLOT_W = 560;
const BAR_H = 15;
const BAR_GAP = 3;
const GROUP_GAP = 12;
/** Width of one character of an 11.5 px label, about, for placing labels. */
const CHAR_W = 6.6;
const FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'";

const COLORS: Record<string, string> = {
  RequestLimiter: '#4e79a7',
  TieredLimiter: '#e15759',
  RateLimiterRedis: '#59a14f',
};
const SERIES = Object.keys(COLORS);

interface Bar {
  readonly series: string;
  readonly value: number;
  readonly text: string;
}
interface Group {
  readonly label: string;
  readonly bars: readonly Bar[];
}
interface Panel {
  readonly title: string;
  readonly note: string;
  readonly groups: readonly Group[];
  readonly scale: 'log' | 'linear';
  /** A dashed vertical line, e.g. at 100 %. */
  readonly reference?: { readonly value: number; readonly label: string };
  readonly tick: (value: number) => string;
}

function esc(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

/** Ticks from 0 at a round step (1, 2, 2.5 or 5 × 10ⁿ), at most 6 of them, the last at or above `max`. */
function linearTicks(max: number): number[] {
  const top = max > 0 ? max : 1;
  const magnitude = 10 ** Math.floor(Math.log10(top / 5));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => top / s <= 5) ?? 10 * magnitude;
  const ticks: number[] = [];
  for (let t = 0; t < top + step; t += step) ticks.push(t);
  return ticks;
}

function panel(p: Panel, y0: number): { svg: string; height: number } {
  const values = p.groups.flatMap((g) => g.bars.map((b) => b.value));
  const positive = values.filter((v) => v > 0);
  let toX: (v: number) => number;
  let ticks: number[];
  if (p.scale === 'log') {
    const lo = 10 ** Math.floor(Math.log10(Math.min(...positive, 1)));
    const hi = 10 ** Math.ceil(Math.log10(Math.max(...positive, 10)));
    const span = Math.log10(hi) - Math.log10(lo);
    toX = (v) => (v <= 0 ? 0 : ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / span) * PLOT_W);
    ticks = [];
    for (let t = lo; t <= hi * 1.0001; t *= 10) ticks.push(t);
  } else {
    ticks = linearTicks(Math.max(...values, p.reference?.value ?? 0) * 1.02);
    const hi = ticks[ticks.length - 1]!;
    toX = (v) => (Math.max(0, v) / hi) * PLOT_W;
  }
  const out: string[] = [];
  out.push(`<text x='16' y='${y0 + 22}' font-size='17' font-weight='bold'>${esc(p.title)}</text>`);
  out.push(`<text x='16' y='${y0 + 42}' font-size='12' fill='#555'>${esc(p.note)}</text>`);
  const plotTop = y0 + 58;
  let y = plotTop;
  for (const group of p.groups) {
    const groupH = group.bars.length * (BAR_H + BAR_GAP) - BAR_GAP;
    out.push(
      `<text x='${LABEL_W - 10}' y='${y + groupH / 2 + 4}' font-size='12.5' text-anchor='end'>${esc(group.label)}</text>`,
    );
    for (const bar of group.bars) {
      const w = bar.value > 0 ? Math.max(1.5, toX(bar.value)) : 0;
      const color = COLORS[bar.series] ?? '#999';
      out.push(`<rect x='${LABEL_W}' y='${y}' width='${w.toFixed(1)}' height='${BAR_H}' fill='${color}'/>`);
      // A label that would run off the right edge goes inside its bar, in white.
      const inside = LABEL_W + w + 5 + bar.text.length * CHAR_W > WIDTH - 8;
      const textX = inside ? LABEL_W + w - 5 : LABEL_W + w + 5;
      const textStyle = inside ? ` fill='white' text-anchor='end'` : '';
      out.push(
        `<text x='${textX}' y='${y + BAR_H - 3.5}' font-size='11.5'${textStyle}>${esc(bar.text)}</text>`,
      );
      y += BAR_H + BAR_GAP;
    }
    y += GROUP_GAP - BAR_GAP;
  }
  const plotBottom = y - GROUP_GAP + BAR_GAP + 4;
  for (const t of ticks) {
    const x = LABEL_W + toX(t);
    out.push(
      `<line x1='${x.toFixed(1)}' y1='${plotTop - 4}' x2='${x.toFixed(1)}' y2='${plotBottom}' stroke='#ddd'/>`,
    );
    out.push(
      `<text x='${x.toFixed(1)}' y='${plotBottom + 14}' font-size='11' fill='#555' text-anchor='middle'>${esc(p.tick(t))}</text>`,
    );
  }
  if (p.reference) {
    const x = LABEL_W + toX(p.reference.value);
    out.push(
      `<line x1='${x.toFixed(1)}' y1='${plotTop - 6}' x2='${x.toFixed(1)}' y2='${plotBottom}' stroke='#333' stroke-dasharray='4 3'/>`,
    );
    out.push(
      `<text x='${x + 4}' y='${plotTop - 8}' font-size='11' fill='#333'>${esc(p.reference.label)}</text>`,
    );
  }
  // Grid lines first, bars over them.
  const grid = out.filter((s) => s.startsWith('<line'));
  const rest = out.filter((s) => !s.startsWith('<line'));
  return { svg: [...grid, ...rest].join('\n'), height: plotBottom + 28 - y0 };
}

function roundTripPanel(rows: readonly ThroughputRow[], accuracy: readonly AccuracyRow[]): Panel | undefined {
  const scenarios = [...new Set(rows.filter((r) => r.roundTripsPer1000 !== null).map((r) => r.scenario))];
  const groups: Group[] = [];
  for (const scenario of scenarios) {
    const bars = SERIES.flatMap((series) => {
      const row = rows.find((r) => r.scenario === scenario && r.limiter === series);
      if (row?.roundTripsPer1000 == null) return [];
      return [{ series, value: row.roundTripsPer1000, text: small(row.roundTripsPer1000) }];
    });
    if (bars.length > 0) groups.push({ label: scenario, bars });
  }
  const saturated = SERIES.flatMap((series) => {
    const row = accuracy.find((r) => r.limiter === series);
    return row ? [{ series, value: row.roundTripsPer1000, text: small(row.roundTripsPer1000) }] : [];
  });
  if (saturated.length > 0) {
    groups.push({ label: `1 key at its limit, ${accuracy[0]!.processes} processes`, bars: saturated });
  }
  if (groups.length === 0) return undefined;
  return {
    title: 'Redis round trips per 1,000 decisions (log scale; fewer is better)',
    note: 'Counted by Redis itself (INFO commandstats). Throughput rows: the limit is never reached; last group: saturated.',
    groups,
    scale: 'log',
    tick: (v) => (v >= 1 ? count(v) : String(v)),
  };
}

function accuracyPanel(rows: readonly AccuracyRow[]): Panel | undefined {
  if (rows.length === 0) return undefined;
  const groups: Group[] = rows.map((r) => {
    const window = r.window
      ? `; busiest window ${count(r.window.admitted)} of bound ${count(Math.floor(r.window.bound))}`
      : '';
    return {
      label: r.limiter,
      bars: [
        {
          series: r.limiter,
          value: r.admittedOfIdeal,
          text: `${percent(r.admittedOfIdeal)} (${count(r.admitted)} of ${count(r.ideal)})${window}`,
        },
      ],
    };
  });
  return {
    title: `Accuracy: admitted / ideal, ${rows[0]!.processes} processes on one key`,
    note: `Capacity 100, 200 per second, ${rows[0]!.durationMs / 1000} s. rate-limiter-flexible: 200 per 1 s window, its nearest limit.`,
    groups,
    scale: 'linear',
    reference: { value: 1, label: 'ideal' },
    tick: (v) => `${Math.round(v * 100)} %`,
  };
}

function fleetPanel(rows: readonly FleetRow[]): Panel | undefined {
  if (rows.length === 0) return undefined;
  const sizes = [...new Set(rows.map((r) => r.instances))];
  return {
    title: 'Fleet simulation: Redis calls per second as the fleet grows',
    note: `${rows[0]!.keys} hot keys, ${count(rows[0]!.targetRate)} requests/s in total, whatever the number of instances.`,
    groups: sizes.map((instances) => ({
      label: `${instances} instances`,
      bars: rows
        .filter((r) => r.instances === instances)
        .map((r) => ({
          series: r.limiter,
          value: r.redisCallsPerSecond,
          text: `${count(r.redisCallsPerSecond)} /s`,
        })),
    })),
    scale: 'linear',
    tick: (v) => count(v),
  };
}

export function chartSvg(results: BenchResults): string {
  const panels = [
    roundTripPanel(results.throughput, results.accuracy),
    accuracyPanel(results.accuracy),
    fleetPanel(results.fleet),
  ].filter((p): p is Panel => p !== undefined);
  const parts: string[] = [];
  // Legend
  let x = 16;
  for (const series of SERIES) {
    parts.push(`<rect x='${x}' y='14' width='14' height='14' fill='${COLORS[series]}'/>`);
    parts.push(`<text x='${x + 20}' y='26' font-size='13'>${esc(series)}</text>`);
    x += 40 + series.length * 8;
  }
  parts.push(
    `<text x='${WIDTH - 16}' y='26' font-size='11.5' fill='#555' text-anchor='end'>${esc(
      `Node ${results.machine.node} · Redis ${results.redis.version} · ${results.machine.cpus} CPUs${results.quick ? ' · quick run' : ''}`,
    )}</text>`,
  );
  let y = 40;
  for (const p of panels) {
    const drawn = panel(p, y);
    parts.push(drawn.svg);
    y += drawn.height + 10;
  }
  return [
    `<svg xmlns='http://www.w3.org/2000/svg' width='${WIDTH}' height='${y}' viewBox='0 0 ${WIDTH} ${y}' stroke='none' ${FONT}>`,
    `<rect width='100%' height='100%' fill='white'/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
