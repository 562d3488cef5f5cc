/** Number formats shared by the terminal table, the markdown and the chart. */

const grouped = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

export function count(n: number): string {
  return grouped.format(n);
}

/** A duration given in ns, in the unit that keeps 3 significant digits readable. */
export function duration(ns: number): string {
  if (ns < 1_000) return `${Math.round(ns)} ns`;
  if (ns < 1_000_000) return `${(ns / 1_000).toPrecision(3)} µs`;
  if (ns < 1_000_000_000) return `${(ns / 1_000_000).toPrecision(3)} ms`;
  return `${(ns / 1_000_000_000).toPrecision(3)} s`;
}

/** A small rate such as round trips per 1,000 decisions: 1,001 · 12.4 · 0.98 · 0.012 · 0. */
export function small(n: number): string {
  if (n === 0) return '0';
  if (n >= 100) return grouped.format(n);
  if (n >= 0.01) return n.toPrecision(3).replace(/\.?0+$/, '');
  return n.toExponential(1);
}

/** A ratio: 1,234× · 12.3× · 0.92×. */
export function times(n: number): string {
  if (n >= 100) return `${grouped.format(n)}×`;
  return `${n.toPrecision(3)}×`;
}

export function percent(share: number, digits = 1): string {
  return `${(share * 100).toFixed(digits)} %`;
}

/** Columns of text, the first left-aligned, the others right-aligned. */
export function textTable(header: readonly string[], lines: readonly (readonly string[])[]): string {
  const widths = header.map((title, i) => Math.max(title.length, ...lines.map((line) => line[i]!.length)));
  const format = (cells: readonly string[]) =>
    cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ');
  return [format(header), widths.map((w) => '─'.repeat(w)).join('  '), ...lines.map(format)].join('\n');
}

/** A GitHub markdown table, the first column left-aligned, the others right-aligned. */
export function markdownTable(header: readonly string[], lines: readonly (readonly string[])[]): string {
  const row = (cells: readonly string[]) => `| ${cells.map((c) => c.replaceAll('|', '\\|')).join(' | ')} |`;
  const rule = `| ${header.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`;
  return [row(header), rule, ...lines.map(row)].join('\n');
}
