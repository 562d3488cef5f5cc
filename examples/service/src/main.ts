/**
 * The example service: `WORKERS` processes (node:cluster) behind one port, sharing their
 * limits through one Redis. `REDIS_URL` names it; unset, a throwaway `redis-server` from PATH
 * is started on a free loopback port and stopped on exit.
 *
 *   pnpm --filter @tiered-limiter/example-service start
 *
 * Environment: PORT (3000; 0 picks a free one), HOST (127.0.0.1), WORKERS (2), REDIS_URL,
 * LIMIT_PREFIX (`example`), STORE_TIMEOUT_MS (each route's own). Prints
 * `listening http://HOST:PORT` once every worker listens.
 */
import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import { startService } from './app.js';
import { type EmbeddedRedis, startEmbeddedRedis } from './embedded-redis.js';

/** How long workers get to finish their requests and return their leases on shutdown. */
const SHUTDOWN_TIMEOUT_MS = 5_000;

const host = process.env.HOST ?? '127.0.0.1';
const port = Number(process.env.PORT ?? 3000);
const workers = Number(process.env.WORKERS ?? 2);

if (cluster.isPrimary) {
  await primary();
} else {
  await worker();
}

async function primary(): Promise<void> {
  let embedded: EmbeddedRedis | undefined;
  let redisUrl = process.env.REDIS_URL;
  if (!redisUrl) {
    embedded = await startEmbeddedRedis();
    redisUrl = embedded.url;
  }
  const env = { REDIS_URL: redisUrl, WORKERS: String(workers) };
  const forked: Worker[] = [];
  let stopping = false;
  let address = '';

  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    const exits = forked.filter((w) => !w.isDead()).map((w) => once(w, 'exit'));
    for (const w of forked) if (!w.isDead()) w.process.kill('SIGTERM');
    const deadline = setTimeout(() => {
      for (const w of forked) if (!w.isDead()) w.process.kill('SIGKILL');
    }, SHUTDOWN_TIMEOUT_MS);
    await Promise.all(exits);
    clearTimeout(deadline);
    await embedded?.stop();
    process.exit(code);
  };
  process.once('SIGINT', () => void stop(0));
  process.once('SIGTERM', () => void stop(0));

  const listening: Promise<unknown>[] = [];
  for (let i = 0; i < workers; i++) {
    const w = cluster.fork(env);
    forked.push(w);
    listening.push(
      new Promise<void>((resolve) => {
        w.once('listening', (info) => {
          address = `http://${host}:${info.port}`;
          resolve();
        });
      }),
    );
    w.once('exit', (code, signal) => {
      if (stopping) return;
      console.error(`worker ${w.process.pid} exited (${signal ?? code}); stopping the service`);
      void stop(1);
    });
  }
  await Promise.all(listening);
  console.log(`listening ${address}`);
  console.log(`${workers} workers, Redis ${redisUrl}${embedded ? ' (embedded)' : ''}`);
}

async function worker(): Promise<void> {
  const service = await startService({
    redisUrl: process.env.REDIS_URL!,
    prefix: process.env.LIMIT_PREFIX ?? 'example',
    instances: workers,
    host,
    port,
    ...(process.env.STORE_TIMEOUT_MS ? { storeTimeoutMs: Number(process.env.STORE_TIMEOUT_MS) } : {}),
  });
  // Ctrl-C signals every process of the terminal's group: this worker hears SIGINT itself and then
  // the primary's SIGTERM. One close, however many signals.
  let closing: Promise<void> | undefined;
  const shutdown = async () => {
    closing ??= service.close();
    await closing;
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown());
  process.once('SIGINT', () => void shutdown());
}
