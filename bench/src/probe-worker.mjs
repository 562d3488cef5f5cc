// The bench's Redis probe, in a process of its own so that neither its verdict nor its latencies
// depend on the bench's event loop: a PING every `everyMs` on its own connection, each failed or
// late past `timeoutMs` counted, and those answered slower than `slowMs` (the limiters' store
// timeout) counted apart. Over IPC: `start` begins a window, `stop` ends it and is answered
// with the window's report. Exits when the parent disconnects.
import { Redis } from 'ioredis';

const { url, everyMs, timeoutMs, slowMs } = JSON.parse(process.argv[2]);
const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
redis.on('error', () => {});
await redis.connect();

let latencies = [];
let failed = 0;
let sent = 0;
const pending = new Set();

function ping() {
  sent++;
  const started = performance.now();
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error('late')), timeoutMs);
  });
  const done = Promise.race([redis.ping(), late])
    .then(
      () => latencies.push(performance.now() - started),
      () => failed++,
    )
    .finally(() => {
      clearTimeout(timer);
      pending.delete(done);
    });
  pending.add(done);
}

const at = (sorted, q) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
let interval;
process.on('message', (message) => {
  if (message.type === 'start') {
    latencies = [];
    failed = 0;
    sent = 0;
    clearInterval(interval);
    ping();
    interval = setInterval(ping, everyMs);
  } else if (message.type === 'stop') {
    clearInterval(interval);
    // PINGs still out get their deadline to answer.
    void Promise.all(pending).then(() => {
      const sorted = latencies.sort((a, b) => a - b);
      process.send({
        type: 'report',
        report: {
          sent,
          failed,
          slow: sorted.filter((ms) => ms > slowMs).length,
          p50Ms: at(sorted, 0.5),
          p99Ms: at(sorted, 0.99),
          maxMs: sorted.at(-1) ?? 0,
        },
      });
    });
  }
});
process.on('disconnect', () => {
  redis.disconnect();
  process.exit(0);
});
process.send({ type: 'ready' });
