import { Worker } from 'node:worker_threads';

/**
 * The worker's loop, as CommonJS source (an `eval` worker needs no file on disk, so the built
 * packages carry no extra asset). It writes the monotonic clock, in `performance.now()`'s
 * timeline of the main thread, into slot 0 every millisecond, says so in slot 1 of `control`, and
 * sleeps on slot 0 of `control` until the main thread asks it to stop.
 */
const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const view = new Float64Array(workerData.clock);
const control = new Int32Array(workerData.control);
const offset = workerData.offset;
while (Atomics.load(control, 0) === 0) {
  view[0] = Number(process.hrtime.bigint()) / 1e6 - offset;
  Atomics.store(control, 1, 1);
  Atomics.wait(control, 0, 0, 1);
}
`;

/**
 * A millisecond clock that never goes stale with the event loop: a worker thread writes the time
 * into shared memory every millisecond, so a read costs a memory load (≈ 1 ns) instead of a
 * `performance.now()` call (40–100 ns), and stays right while the main thread is blocked (a busy
 * loop, a long GC, a handler that computes). A coarse clock advanced by a timer on the main
 * thread goes stale exactly then, and the two-tier limiter's hot path must not spend a leased
 * token past its lease on a clock that old.
 *
 * One worker serves every limiter of the process, from the first `acquire()` to the last
 * `release()`, and a limiter holds it only while its hot path is busy (`HotClock`): each wake-up
 * cost 20–40 µs of CPU on a 2-core VM, 2–4 % of a core in all, more than `performance.now()` (70 ns
 * there) costs below a few hundred thousand reads a second. 60 ms to start, about 10 MB; its reading
 * lagged the true time by at most 4–12 ms with both cores busy, and the store's grace period
 * (`MIN_LEASE_GRACE_MS`) covers far more than that.
 */
export interface SharedClock {
  /** Slot 0 is the time, in ms of this thread's `performance.now()`; read it directly on hot paths. */
  readonly view: Float64Array;
  /**
   * Whether the worker has written the time yet. From its start to its first write (53–158 ms on
   * a 2-core machine, more with both cores busy) the slot stands still: a hot path that read it
   * then kept remembered denials past their end, and a hot key at its limit lost admissions.
   */
  running(): boolean;
}

let shared: { clock: SharedClock; worker: Worker | undefined; control: Int32Array } | undefined;
let users = 0;

/**
 * Starts (or joins) the process's shared clock; pair each call with one `releaseSharedClock`.
 * `undefined` when no worker thread could be started: the caller then reads its own clock.
 */
export function acquireSharedClock(): SharedClock | undefined {
  users++;
  if (shared === undefined) shared = start();
  // Fresh until the worker's first write, and whenever a limiter reads the clock itself.
  touchSharedClock();
  return shared.worker === undefined ? undefined : shared.clock;
}

/** Leaves the shared clock; the worker stops when the last user leaves. */
export function releaseSharedClock(): void {
  if (users === 0) return;
  users--;
  if (users > 0 || shared === undefined) return;
  const { worker, control } = shared;
  shared = undefined;
  Atomics.store(control, 0, 1);
  Atomics.notify(control, 0);
  void worker?.terminate();
}

/** Writes `performance.now()` into the shared clock if it is behind (e.g. the worker is starting). */
export function touchSharedClock(): void {
  if (shared === undefined) return;
  const now = performance.now();
  const view = shared.clock.view;
  if (view[0]! < now) view[0] = now;
}

function start(): { clock: SharedClock; worker: Worker | undefined; control: Int32Array } {
  const clockBuffer = new SharedArrayBuffer(8);
  const controlBuffer = new SharedArrayBuffer(8);
  const view = new Float64Array(clockBuffer);
  const control = new Int32Array(controlBuffer);
  view[0] = performance.now();
  let worker: Worker | undefined;
  try {
    worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { clock: clockBuffer, control: controlBuffer, offset: hrtimeOffset() },
      stdout: false,
      stderr: false,
    });
    // The clock never keeps a process alive, and a failing worker only degrades to the main
    // thread's own readings (see touchSharedClock), never to an uncaught error.
    worker.unref();
    worker.on('error', () => {});
  } catch {
    worker = undefined;
  }
  return { clock: { view, running: () => Atomics.load(control, 1) === 1 }, worker, control };
}

/**
 * `process.hrtime` and `performance.now()` read the same monotonic clock from different origins;
 * the offset between them, taken from the tightest of a few paired readings.
 */
function hrtimeOffset(): number {
  let best = Number.POSITIVE_INFINITY;
  let offset = 0;
  for (let i = 0; i < 16; i++) {
    const before = performance.now();
    const hr = Number(process.hrtime.bigint()) / 1e6;
    const after = performance.now();
    if (after - before < best) {
      best = after - before;
      offset = hr - (before + after) / 2;
    }
  }
  return offset;
}
