import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Probe, ProbeReport } from './health.js';
import type { BenchSettings, Named } from './section.js';

const ROW_WORKER = fileURLToPath(new URL('./row-worker.ts', import.meta.url));

/** What a row process is told: a section, and which of its tasks to run, in order. */
export interface RowOrders {
  readonly section: string;
  readonly tasks: readonly { readonly name: string; readonly prefix: string }[];
  readonly settings: BenchSettings;
  /** The run's Redis, when the section uses it. */
  readonly url: string | undefined;
}

export type RowMessage =
  | { readonly type: 'row'; readonly row: Named }
  | { readonly type: 'probe-start' }
  | { readonly type: 'probe-stop' };

/**
 * Measures `orders.tasks` in a fresh process (with this one's node flags: the TypeScript loader,
 * `--expose-gc`), serving its probe windows from `probe`; `onRow` gets each row as it arrives, and
 * the promise resolves once every task has sent its row.
 */
export function measureApart(
  orders: RowOrders,
  probe: Probe | undefined,
  onRow: (row: Named) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    // The child's stdout goes to stderr: stdout carries `--json`.
    const child = fork(ROW_WORKER, [JSON.stringify(orders)], { stdio: ['ignore', 2, 2, 'ipc'] });
    let window: { stop(): Promise<ProbeReport> } | undefined;
    let rows = 0;
    child.on('message', (message: RowMessage) => {
      if (message.type === 'row') {
        rows++;
        onRow(message.row);
      } else if (message.type === 'probe-start') window = probe?.window();
      else if (message.type === 'probe-stop') {
        const report = window?.stop() ?? Promise.resolve(null);
        void report.then((r) => child.send({ type: 'probe-report', report: r }));
      }
    });
    child.once('exit', (code, signal) => {
      if (rows === orders.tasks.length) resolve();
      else reject(new Error(`${orders.section}: its process exited (${code ?? signal}) after ${rows} rows`));
    });
  });
}
