import { count, duration, small } from './format.js';
import { type Health, loopCell, type PolicyCount, policyCell } from './health.js';
import type { Column } from './section.js';

/** Columns more than one section shows, so that each table reads the same way. */

/** What every row that decides shows: who decided what, and the health around it. */
export interface Accounted {
  readonly name: string;
  readonly decisions: number;
  /** Admitted and denied by the limit; the failure policy's decisions apart, never among these. */
  readonly allowed: number;
  readonly denied: number;
  readonly policy: PolicyCount | null;
  readonly health: Health;
}

/** `allowed`, `denied` and `policy`. */
function decisionColumns<R extends Accounted>(): Column<R>[] {
  return [
    { title: 'allowed', cell: (r) => count(r.allowed) },
    { title: 'denied', cell: (r) => count(r.denied) },
    { title: 'policy', cell: (r) => policyCell(r.policy, r.health) },
  ];
}

/** `allowed, denied, policy` for a progress line. */
export function decisionWords(row: Accounted): string {
  return `${count(row.allowed)} allowed, ${count(row.denied)} denied, policy ${policyCell(row.policy, row.health)}`;
}

/** `p50` and `p99` of a row's decisions, given in ns. */
function latencyColumns<R extends { readonly p50Ns: number; readonly p99Ns: number }>(): Column<R>[] {
  return [
    { title: 'p50', cell: (r) => duration(r.p50Ns) },
    { title: 'p99', cell: (r) => duration(r.p99Ns) },
  ];
}

/** Redis round trips per 1,000 decisions, `—` where `counted` says the row made none to count. */
function roundTripColumn<R extends { readonly roundTripsPer1000: number }>(
  counted: (row: R) => boolean = () => true,
): Column<R> {
  return { title: 'Redis RT / 1,000', cell: (r) => (counted(r) ? small(r.roundTripsPer1000) : '—') };
}

/** The event-loop delay of the process that decided. */
function loopColumn<R extends Accounted>(
  title = 'loop p99 / max',
  of: (row: R) => Pick<Health, 'loopDelayP99Ms' | 'loopDelayMaxMs'> = (row) => row.health,
): Column<R> {
  return { title, cell: (r) => loopCell(of(r)) };
}

/** The PING p99 of another client, in another process, while the row ran: what others' latency became. */
function probeColumn<R extends Accounted>(): Column<R> {
  return {
    title: 'other client p99',
    cell: (r) => (r.health.probe === null ? '—' : duration(r.health.probe.p99Ms * 1e6)),
  };
}

/** The shared columns: `...columns.decisions<Row>()`, `columns.loop<Row>()`. */
export const columns = {
  decisions: decisionColumns,
  latency: latencyColumns,
  roundTrips: roundTripColumn,
  loop: loopColumn,
  probe: probeColumn,
};
