import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { perMinute } from '@tiered-limiter/core';
import { createRedisLimiter } from '@tiered-limiter/redis';
import {
  freePort,
  type RedisServer,
  startRedis,
  uniquePrefix,
  whenReady,
} from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// fetchRateLimit inside a real Next.js app (test/nextjs-app: an App Router route handler and the
// proxy, the middleware of Next.js 16, on the Node.js runtime, Redis limiters), built with `next build` and served by `next
// start` as a deployment serves it, from the built packages. What only Next.js can tell: its
// bundler takes the packages, its server hands the handler a `Request` whose client address is in
// `X-Forwarded-For`, and the handler's `Response.json` takes the headers.
const run = promisify(execFile);
const NEXT = createRequire(import.meta.url).resolve('next/dist/bin/next');
const FIXTURE = fileURLToPath(new URL('./nextjs-app/', import.meta.url));
/** Inside test/, so that the copy resolves next, react, ioredis and the packages as the fixture does. */
const TEST_DIR = fileURLToPath(new URL('.', import.meta.url));
const START_TIMEOUT_MS = 60_000;

let redis: RedisServer;
let client: Redis;
let app: string;
let server: ChildProcess;
let base: string;
const prefix = uniquePrefix('nextjs');
let output = '';

beforeAll(async () => {
  redis = await startRedis();
  client = redis.client();
  await whenReady(client);
  app = mkdtempSync(join(TEST_DIR, '.nextjs-'));
  cpSync(FIXTURE, app, { recursive: true });
  const env = { ...process.env, NEXT_TELEMETRY_DISABLED: '1' };
  // A build machine has no Redis: the build must not need one.
  await run(process.execPath, [NEXT, 'build'], { cwd: app, env, timeout: 180_000 });
  const port = await freePort();
  server = spawn(process.execPath, [NEXT, 'start', '-H', '127.0.0.1', '-p', String(port)], {
    cwd: app,
    env: { ...env, REDIS_URL: redis.url, TL_PREFIX: prefix },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  server.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  server.stderr!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  base = `http://127.0.0.1:${port}`;
  const started = performance.now();
  while (!/Ready in/.test(output)) {
    if (server.exitCode !== null) throw new Error(`next start exited (${server.exitCode}):\n${output}`);
    if (performance.now() - started > START_TIMEOUT_MS) throw new Error(`next start not ready:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}, 240_000);

afterAll(async () => {
  if (server !== undefined && server.exitCode === null && server.signalCode === null) {
    const exited = once(server, 'exit');
    server.kill('SIGTERM');
    await exited;
  }
  if (app !== undefined) rmSync(app, { recursive: true, force: true });
  client?.disconnect();
  await redis?.stop();
});

interface Reply {
  status: number;
  headers: Record<string, string>;
  body: { key?: string; tier?: string; type?: string };
}

async function get(path: string, forwardedFor?: string): Promise<Reply> {
  const headers: Record<string, string> =
    forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor };
  const response = await fetch(base + path, { headers });
  return {
    status: response.status,
    headers: Object.fromEntries(response.headers),
    body: (await response.json()) as Reply['body'],
  };
}

describe('fetchRateLimit in a Next.js app (next build, next start)', () => {
  it('keys each client by the X-Forwarded-For address a proxy appended, by Redis from the first request, and answers the fourth with a 429 problem document', async () => {
    const first = await get('/api/items', '203.0.113.7');
    // The fixture waits for the connection on its first request: Redis decides it, not the policy.
    expect(first).toMatchObject({ status: 200, body: { key: '203.0.113.7', tier: 'global' } });
    expect(first.headers['ratelimit-policy']).toBe('"items";q=3;w=60');
    expect(first.headers.ratelimit).toMatch(/^"items";r=2;t=\d+$/);
    const rest = [];
    for (let i = 0; i < 3; i++) rest.push(await get('/api/items', '203.0.113.7'));
    expect(rest.map((reply) => reply.status)).toEqual([200, 200, 429]);
    const denied = rest[2]!;
    expect(denied.headers['content-type']).toBe('application/problem+json');
    expect(Number(denied.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(denied.body.type).toBe('about:blank');
    // Another client has a limit of its own.
    expect(await get('/api/items', '198.51.100.2')).toMatchObject({
      status: 200,
      body: { key: '198.51.100.2' },
    });
  });

  // Next.js's server sets X-Forwarded-For to the socket's address only when a request has none:
  // with no proxy in front, the key is the client's own claim (the README says so).
  it('keys a request without X-Forwarded-For by the socket address Next.js put there, and one with it by its claim', async () => {
    expect((await get('/api/items')).body.key).toBe('127.0.0.1');
    expect((await get('/api/items', '192.0.2.44')).body.key).toBe('192.0.2.44');
  });

  it('gives a failed response’s token back (skipFailedRequests): four 500s, then three 200s and a 429', async () => {
    const address = '192.0.2.77';
    const reader = createRedisLimiter({
      redis: client,
      prefix: `${prefix}-items`,
      limits: perMinute(3, { name: 'items' }),
      failurePolicy: 'closed',
      timeoutMs: 1000,
    });
    try {
      for (let i = 0; i < 4; i++) {
        expect((await get('/api/items?fail', address)).status).toBe(500);
        // The refund is a store call made after the response: wait for it to land.
        const until = performance.now() + 5000;
        while ((await reader.peek(address)).remaining !== 3 && performance.now() < until) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        expect((await reader.peek(address)).remaining).toBe(3);
      }
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await get('/api/items', address)).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
    } finally {
      await reader.close();
    }
  });

  it('limits in the proxy (middleware) before the route runs: its headers reach the route’s response, and the third request is a 429', async () => {
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await get('/api/guarded', '203.0.113.50'));
    expect(replies.map((reply) => reply.status)).toEqual([200, 200, 429]);
    expect(replies[0]!.body).toEqual({ guarded: true });
    expect(replies[0]!.headers['ratelimit-policy']).toBe('"guarded";q=2;w=60');
    expect(replies[1]!.headers.ratelimit).toMatch(/^"guarded";r=0;t=\d+$/);
    expect(replies[2]!.headers['content-type']).toBe('application/problem+json');
    expect(await get('/api/guarded', '198.51.100.50')).toMatchObject({ status: 200 });
  });
});
