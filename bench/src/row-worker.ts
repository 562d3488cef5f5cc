// Rows of one section in a process of their own, so that no row runs on code the JIT shaped for
// other rows (a two-tier hot-key row measured 4× slower after the 100k-keys rows than alone). A
// full run gives each row its own process. Orders come as JSON in argv[2] (`RowOrders`); each row
// goes back over IPC as it is measured, and the probe windows are served by the parent's probe.
import type { ProbeReport, ProbeWindows } from './health.js';
import { rowRedis } from './redis-target.js';
import type { RowMessage, RowOrders } from './row-process.js';
import { SECTION_LOADERS } from './sections.js';

const orders = JSON.parse(process.argv[2]!) as RowOrders;

// The IPC channel closes when the bench exits (a signal, a crash): its row is no longer wanted,
// and a row runs for seconds and loads the machine, so this process ends with it rather than
// finishing the row for no one. Its own disconnect below, once every row is sent, ends it the same way.
process.once('disconnect', () => process.exit(0));
const send = (message: RowMessage) =>
  new Promise<void>((resolve, reject) =>
    process.send!(message, (error: Error | null) => (error ? reject(error) : resolve())),
  );

/** The parent's probe, window by window. */
const probe: ProbeWindows = {
  window() {
    void send({ type: 'probe-start' });
    return {
      stop: () =>
        new Promise<ProbeReport>((resolve) => {
          process.once('message', (message: { type: string; report: ProbeReport }) =>
            resolve(message.report),
          );
          void send({ type: 'probe-stop' });
        }),
    };
  },
};

const load = SECTION_LOADERS[orders.section];
if (load === undefined) throw new Error(`no section ${orders.section}`);
const section = await load();
const tasks = section.tasks(orders.settings);
const target = orders.url === undefined ? undefined : rowRedis(orders.url, probe);
try {
  for (const { name, prefix } of orders.tasks) {
    const task = tasks.find((t) => t.name === name);
    if (task === undefined) throw new Error(`no task ${orders.section} / ${name}`);
    await send({
      type: 'row',
      row: await section.measure(task, { settings: orders.settings, target, prefix }),
    });
  }
} finally {
  target?.close();
}
process.disconnect();
