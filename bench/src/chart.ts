import type { FleetRow } from './fleet-sim.js';
import { count } from './format.js';
import type { BenchResults } from './results.js';
import type { ThroughputRow } from './throughput.js';

/**
 * `latest.svg`: panels of horizontal bars, each bar labelled with its value, so no axis is
 * needed. Plain SVG text: a charting library would bring a browser or a canvas for two panels.
 */

const SERIES: Record<string, string> = {
  RequestLimiter: '#4e79a7',
  TieredLimiter: '#e15759',
  'TieredLimiter (optimistic)': '#f28e2b',
  RateLimiterRedis: '#59a14f',
};
/** Widths of the picture, of the labels left of the bars, and of the longest bar; a bar's height. */
const [WIDTH, LABEL_W, PLOT_W, BAR_H] = [900, 260, 480, 14];

interface Bar {
  readonly series: string;
  readonly value: number;
  readonly text: string;
}
interface Panel {
  readonly title: string;
  readonly groups: readonly { readonly label: string; readonly bars: readonly Bar[] }[];
  /** Log scale when values span orders of magnitude. */
  readonly log: boolean;
}

const esc = (text: string) => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
const text = (x: number, y: number, body: string, size = 12, extra = '') =>
  `<text x='${x.toFixed(1)}' y='${y}' font-size='${size}'${extra}>${esc(body)}</text>`;

function drawPanel(panel: Panel, top: number): { svg: string[]; bottom: number } {
  const values = panel.groups.flatMap((g) => g.bars.map((b) => b.value)).filter((v) => v > 0);
  const max = Math.max(...values, 1);
  const min = Math.min(...values, max / 10);
  const scale = panel.log
    ? (v: number) => (Math.log10(v / min) + 0.3) / (Math.log10(max / min) + 0.3)
    : (v: number) => v / max;
  const svg = [text(16, top + 18, panel.title, 15, " font-weight='bold'")];
  let y = top + 32;
  for (const group of panel.groups) {
    svg.push(
      text(LABEL_W - 8, y + group.bars.length * (BAR_H + 2) * 0.5 + 4, group.label, 12, " text-anchor='end'"),
    );
    for (const bar of group.bars) {
      const w = bar.value > 0 ? Math.max(2, scale(bar.value) * PLOT_W) : 0;
      svg.push(
        `<rect x='${LABEL_W}' y='${y}' width='${w.toFixed(1)}' height='${BAR_H}' fill='${SERIES[bar.series] ?? '#999'}'/>`,
      );
      svg.push(text(LABEL_W + w + 6, y + BAR_H - 3, bar.text, 11));
      y += BAR_H + 2;
    }
    y += 10;
  }
  return { svg, bottom: y };
}

/** Decisions per second of each limiter, per limit, 1 hot key at 64 in flight. */
function throughputPanel(rows: readonly ThroughputRow[]): Panel {
  const chosen = rows.filter((r) => r.keys === 1 && r.inFlight === 64 && r.limiter in SERIES);
  const limits = [...new Set(chosen.map((r) => r.limit))];
  return {
    title: 'Decisions per second, 1 hot key, 64 in flight (log scale)',
    log: true,
    groups: limits.map((limit) => ({
      label: limit,
      bars: chosen
        .filter((r) => r.limit === limit)
        .map((r) => ({ series: r.limiter, value: r.opsPerSecond, text: `${count(r.opsPerSecond)}/s` })),
    })),
  };
}

/** Decisions per second of each limiter on 100,000 keys, per key set, at 256 in flight. */
function keysPanel(rows: readonly ThroughputRow[]): Panel {
  const chosen = rows.filter((r) => r.inFlight === 256 && r.limiter in SERIES);
  const sets = [...new Set(chosen.map((r) => r.keySet))];
  return {
    title: '100,000 keys at capacity 100, 10/s each, 256 in flight',
    log: false,
    groups: sets.map((set) => ({
      label: set === 'zipf' ? 'Zipf (hot keys bite)' : 'in turn (warm, rarely denied)',
      bars: chosen
        .filter((r) => r.keySet === set)
        .map((r) => ({ series: r.limiter, value: r.opsPerSecond, text: `${count(r.opsPerSecond)}/s` })),
    })),
  };
}

function fleetPanel(rows: readonly FleetRow[]): Panel {
  const sizes = [...new Set(rows.map((r) => r.instances))];
  return {
    title: 'Fleet simulation: Redis calls per second as the fleet grows',
    log: false,
    groups: sizes.map((instances) => ({
      label: `${instances} instances`,
      bars: rows
        .filter((r) => r.instances === instances)
        .map((r) => ({
          series: r.limiter,
          value: r.redisCallsPerSecond,
          text: `${count(r.redisCallsPerSecond)}/s`,
        })),
    })),
  };
}

export function chartSvg(results: BenchResults): string {
  const panels = [
    throughputPanel((results.rows.throughput ?? []) as ThroughputRow[]),
    keysPanel((results.rows.keys ?? []) as ThroughputRow[]),
    fleetPanel((results.rows.fleet ?? []) as FleetRow[]),
  ].filter((p) => p.groups.length > 0);
  const svg = Object.entries(SERIES).flatMap(([series, color], i) => [
    `<rect x='${16 + i * 150}' y='12' width='12' height='12' fill='${color}'/>`,
    text(34 + i * 150, 22, series, 11),
  ]);
  const about = `Node ${results.machine.node} · Redis ${results.redis?.version ?? '—'} · ${results.machine.cpus} CPUs`;
  svg.push(
    text(
      WIDTH - 16,
      22,
      `${about}${results.quick ? ' · quick run' : ''}`,
      12,
      " text-anchor='end' fill='#555'",
    ),
  );
  let y = 36;
  for (const panel of panels) {
    const drawn = drawPanel(panel, y);
    svg.push(...drawn.svg);
    y = drawn.bottom + 6;
  }
  return [
    `<svg xmlns='http://www.w3.org/2000/svg' width='${WIDTH}' height='${y}' viewBox='0 0 ${WIDTH} ${y}' font-family='DejaVu Sans, Helvetica, Arial, sans-serif'>`,
    `<rect width='100%' height='100%' fill='white'/>`,
    ...svg,
    '</svg>',
    '',
  ].join('\n');
}
