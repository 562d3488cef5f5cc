import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { type RedisCluster, type RedisServer, startCluster, startRedis } from '@tiered-limiter/test-harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const TEST_DIR = fileURLToPath(new URL('.', import.meta.url));

/** Runs `script` as an ES module in a plain `node` of its own, killed after 20 s. */
const runModule = (script: string) =>
  spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: TEST_DIR,
    encoding: 'utf8',
    timeout: 20_000,
  });

describe('lifecycle', () => {
  it("a limiter's timers never keep the process alive", () => {
    // Built packages, as a service runs them; nothing is closed, so only unref'd timers remain.
    const script = `
      import { perSecond } from '@tiered-limiter/core';
      import { LocalLimiter, MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
      const store = new MemoryStore();
      const tiered = new TieredLimiter({ store, limits: perSecond(100), failurePolicy: 'local', instances: 2 });
      const request = new RequestLimiter({ store, limits: perSecond(100), failurePolicy: 'open' });
      new LocalLimiter({ limits: perSecond(1) }).tryConsume('k');
      for (let i = 0; i < 50; i++) await tiered.consume('k');
      await request.consume('k');
      console.log('done', tiered.stats().decisions.lease > 0);
    `;
    const started = performance.now();
    const run = runModule(script);
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('done true');
    expect(run.status).toBe(0);
    // The coarse clock ticks every 5 ms forever: had it been ref'd, the timeout above would kill it.
    expect(performance.now() - started).toBeLessThan(15_000);
  });

  it('a pending acquire() keeps the process alive until it resolves', () => {
    // The key's one token is spent, the next comes 400 ms later: the process must live to see the
    // acquire resolve (nothing else holds the event loop), then exit on its own.
    const script = `
      import { defineLimit } from '@tiered-limiter/core';
      import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
      const limits = defineLimit({ capacity: 1, refillPerSecond: 2.5 });
      const tiered = new TieredLimiter({ store: new MemoryStore(), limits, failurePolicy: 'closed' });
      await tiered.consume('k');
      const started = performance.now();
      tiered.acquire('k', 1, { maxWaitMs: 5_000 }).then((result) => {
        console.log(result.reason, performance.now() - started >= 300);
      });
    `;
    const run = runModule(script);
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('acquired true');
    expect(run.status).toBe(0);
  });

  it('close() is idempotent and a closed limiter says so clearly', async () => {
    const { perSecond } = await import('@tiered-limiter/core');
    const { MemoryStore, TieredLimiter, RequestLimiter } = await import('@tiered-limiter/local');
    const tiered = new TieredLimiter({
      store: new MemoryStore(),
      limits: perSecond(10),
      failurePolicy: 'open',
    });
    const request = new RequestLimiter({
      store: new MemoryStore(),
      limits: perSecond(10),
      failurePolicy: 'open',
    });
    await tiered.close();
    await tiered.close();
    await request.close();
    expect(() => tiered.tryConsume('k')).toThrow(/TieredLimiter is closed/);
    expect(() => tiered.acquire('k')).toThrow(expect.objectContaining({ code: 'ERR_TL_CLOSED' }));
    expect(() => request.consume('k')).toThrow(/RequestLimiter is closed/);
  });
});

/**
 * Runs `script` as an ES module in a plain `node` of its own, which must end by itself: killed
 * after 20 s (its status is then null). Asynchronous, so the test's own servers go on answering.
 */
function runModuleAsync(script: string, env: Record<string, string>) {
  return new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
      cwd: TEST_DIR,
      env: { ...process.env, ...env },
      timeout: 20_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

// Every kind of limiter over Redis (the per-request one coalesced and not, the two-tier one with
// the sync, without it and optimistic), wrapped by the otel instrumentation and behind the node:http
// middleware, driven, then closed in the README's order while Redis is paused with calls out: the
// server, the limiters, the metrics, the client. Then no timer, immediate, socket, worker or other
// handle made by the packages' code is left (an async_hooks census from the start, unref'd timers
// included), no warning was emitted, nothing rejected unhandled, and the process ends by itself.
const AFTER_CLOSE = `
  import { createHook } from 'node:async_hooks';
  import { realpathSync } from 'node:fs';
  import { createServer, get } from 'node:http';
  import { once } from 'node:events';
  import { dirname, join } from 'node:path';
  import { fileURLToPath } from 'node:url';
  const ours = ['core', 'local', 'redis', 'http', 'otel'].map((name) =>
    join(dirname(realpathSync(fileURLToPath(import.meta.resolve('@tiered-limiter/' + name)))), '/'),
  );
  const live = new Map();
  Error.stackTraceLimit = 50;
  createHook({
    init(id, type) {
      if (type === 'PROMISE' || type === 'TickObject' || type === 'Microtask') return;
      const frame = new Error().stack.split('\\n').find((line) => ours.some((dir) => line.includes(dir)));
      if (frame !== undefined) live.set(id, type + frame.trim());
    },
    destroy(id) {
      live.delete(id);
    },
  }).enable();
  const warnings = [];
  process.on('warning', (warning) => warnings.push(warning.name + ': ' + warning.message));
  const { perSecond } = await import('@tiered-limiter/core');
  const { LocalLimiter, RequestLimiter, TieredLimiter } = await import('@tiered-limiter/local');
  const { RedisStore, recommendedClusterOptions, recommendedRedisOptions, whenReady } = await import('@tiered-limiter/redis');
  const { createRateLimit } = await import('@tiered-limiter/http');
  const { instrumentStore, observeLimiter } = await import('@tiered-limiter/otel');
  const { MeterProvider } = await import('@opentelemetry/sdk-metrics');
  const { Cluster, Redis } = await import('ioredis');

  const port = Number(process.env.TL_PORT);
  const cluster = process.env.TL_CLUSTER === '1';
  const redis = cluster
    ? new Cluster([{ host: '127.0.0.1', port }], recommendedClusterOptions)
    : new Redis(port, '127.0.0.1', recommendedRedisOptions);
  await whenReady(redis);
  const provider = new MeterProvider();
  const meter = provider.getMeter('lifecycle');
  const limits = perSecond(1000, { name: 'api' });
  const store = (name, options = {}) => new RedisStore({ redis, prefix: process.env.TL_PREFIX + name, ...options });
  const common = { limits, timeoutMs: 1000 };
  const limiters = [
    new LocalLimiter({ limits }),
    new RequestLimiter({ ...common, store: store('r'), failurePolicy: 'closed' }),
    new RequestLimiter({ ...common, store: store('n', { coalesce: false }), failurePolicy: 'open' }),
    new TieredLimiter({ ...common, store: instrumentStore(store('t'), meter), failurePolicy: 'local', instances: 2 }),
    new TieredLimiter({ ...common, store: store('s'), failurePolicy: 'open', sync: false }),
    new TieredLimiter({ ...common, store: store('o'), failurePolicy: 'open', instances: 1, coldStart: { mode: 'optimistic' } }),
  ];
  const observations = limiters.map((limiter) => observeLimiter(limiter, meter));
  const rateLimit = createRateLimit({ limiter: limiters[3] });
  const server = createServer(async (req, res) => {
    if (await rateLimit(req, res)) res.end('ok');
  }).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const fetched = [];
  for (let i = 0; i < 5; i++) {
    fetched.push(new Promise((resolve) => get({ port: server.address().port, host: '127.0.0.1', agent: false }, (res) => res.resume().on('end', () => resolve(res.statusCode)))));
  }
  const until = performance.now() + 300;
  while (performance.now() < until) {
    const calls = [];
    for (const limiter of limiters) {
      for (let i = 0; i < 20; i++) calls.push(limiter.tryConsume?.('k' + i) ?? limiter.consume('k' + i));
      calls.push(limiter.peek('k1'), limiter.reward('k2', 1), limiter.penalty('k3', 1), limiter.reset('k4'));
      limiter.block('k5', 50);
      if (limiter.acquire) calls.push(limiter.acquire('k6', 1, { maxWaitMs: 100 }));
    }
    await Promise.all(calls);
  }
  const statuses = await Promise.all(fetched);
  // Calls out while Redis is paused, then the README's order: server, limiters, metrics, client.
  const masters = cluster ? redis.nodes('master') : [redis];
  const admins = masters.map((node) => new Redis(node.options.port, '127.0.0.1'));
  await Promise.all(admins.map((admin) => admin.call('CLIENT', 'PAUSE', '150')));
  const out = limiters.map((limiter) => limiter.consume('paused'));
  await new Promise((resolve) => server.close(resolve));
  await Promise.all(limiters.map((limiter) => limiter.close()));
  await Promise.all(limiters.map((limiter) => limiter.close()));
  for (const observation of observations) observation.stop();
  await provider.shutdown();
  redis.disconnect();
  for (const admin of admins) admin.disconnect();
  const tiers = (await Promise.all(out)).map((decision) => decision.tier);
  // Garbage is no handle: randomUUID's synchronous refill of its entropy leaves a RANDOMBYTESREQUEST
  // wrap that is destroyed only when collected, which a run with no collection by now listed as live.
  globalThis.gc();
  await new Promise((resolve) => setImmediate(resolve));
  console.log(JSON.stringify({ statuses, tiers, live: [...live.values()], warnings }));
`;

describe('after close(), on Redis', () => {
  let server: RedisServer;
  let cluster: RedisCluster;
  beforeAll(async () => {
    [server, cluster] = await Promise.all([startRedis(), startCluster({ masters: 3 })]);
  });
  afterAll(async () => {
    await Promise.all([server?.stop(), cluster?.stop()]);
  });

  it.each(['server', 'Cluster'] as const)(
    'on a %s: nothing of ours is left running, no warning, and the process ends by itself',
    async (kind) => {
      const run = await runModuleAsync(AFTER_CLOSE, {
        TL_PORT: String(kind === 'server' ? server.port : cluster.nodes[0]!.port),
        TL_CLUSTER: kind === 'Cluster' ? '1' : '0',
        TL_PREFIX: `lifecycle-${process.pid}-${kind}-`,
      });
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({
        statuses: [200, 200, 200, 200, 200],
        // Decided by Redis once the pause is over, none by policy; the LocalLimiter in process,
        // and the optimistic limiter on credit (a new key), at once.
        tiers: ['local', 'global', 'global', 'global', 'global', 'local'],
        live: [],
        warnings: [],
      });
    },
  );
});
