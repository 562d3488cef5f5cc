/**
 * Requests at the edges, on every adapter over real sockets: an absolute-form target (a route's
 * limit still applies), a client that leaves while its decision is awaited, pipelined or not, or
 * that the server times out (its tokens come back under `skipFailedRequests`), and a limiter closed
 * while a response runs (no crash, a warning).
 */
import { createServer } from 'node:http';
import { connect } from 'node:net';
import { defineLimit, perMinute } from '@tiered-limiter/core';
import { createRateLimit } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ADAPTERS, type ContractOptions, closeApps } from './adapters.js';
import { listen, SlowStore, tokensIn } from './helpers.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await closeApps();
  await Promise.all(closers.splice(0).map((close) => close()));
});

const API = defineLimit({ capacity: 3, refillPerSecond: 0.001, name: 'api' });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `done()` holds, 2 s at most. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !done(); i++) await sleep(5);
}

/** The status of one request written by hand, with `target` as its request target. */
function statusOfRawRequest(url: string, method: string, target: string): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(
        `${method} ${target} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
      );
    });
    let head = '';
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString();
      const match = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (match) {
        resolve(Number(match[1]));
        socket.destroy();
      }
    });
    socket.on('error', reject);
  });
}

/** A limit of one login a minute, closed after the test. */
function oneLoginAMinute(): RequestLimiter {
  const login = new RequestLimiter({
    store: new MemoryStore(),
    limits: perMinute(1, { name: 'login' }),
    failurePolicy: 'closed',
  });
  closers.push(() => login.close());
  return login;
}

/** The statuses of `targets`, sent one after another as written (fetch would resolve them). */
async function statusesOf(url: string, method: string, targets: readonly string[]): Promise<number[]> {
  const statuses = [];
  for (const target of targets) statuses.push(await statusOfRawRequest(url, method, target));
  return statuses;
}

describe.each(ADAPTERS)('requests at the edges, $name', (adapter) => {
  it('an absolute-form target meets the limit of the route its path names', async () => {
    const { url } = await adapter.start({ routes: { 'POST /login': oneLoginAMinute() } } as ContractOptions);
    expect(await statusesOf(url, 'POST', [`${url}/login`, `${url}/login`, `${url}/login`])).toEqual([
      200, 429, 429,
    ]);
  });

  it('a backslash meets the limit of the path it spells with a slash', async () => {
    const { url } = await adapter.start({ routes: { 'POST /login': oneLoginAMinute() } } as ContractOptions);
    // Express sends a target with a `#` through url.parse, which reads `\\` as `/`: `/login/`. A
    // server that refuses such a path before the app answers its own status, and the route never runs.
    const refused = adapter.refusesBackslash ?? 429;
    expect(await statusesOf(url, 'POST', ['/login', '/login\\#x', '/LOGIN\\'])).toEqual([
      200,
      refused,
      refused,
    ]);
  });

  it('a client gone before its decision came: skipFailedRequests gives its tokens back', async () => {
    const store = new SlowStore(200);
    const limiter = new RequestLimiter({ store, limits: API, failurePolicy: 'open', timeoutMs: 5000 });
    closers.push(() => limiter.close());
    const { url } = await adapter.start({ limiter, skipFailedRequests: true } as ContractOptions);
    const gone = new AbortController();
    const asked = fetch(`${url}/items`, { signal: gone.signal }).catch(() => undefined);
    await sleep(50);
    gone.abort();
    await asked;
    // The decision lands 150 ms later, admitted, on a response already closed: a failed one.
    await sleep(400);
    expect(await tokensIn(store, '127.0.0.1', [API])).toBe(3);
  });

  it('a pipelined request queued behind one whose client leaves: skipFailedRequests gives its tokens back', async () => {
    const store = new MemoryStore();
    const limiter = new RequestLimiter({ store, limits: API, failurePolicy: 'open' });
    closers.push(() => limiter.close());
    const reward = vi.spyOn(limiter, 'reward');
    const app = await adapter.start({ limiter, skipFailedRequests: true } as ContractOptions);
    const { hostname, port } = new URL(app.url);
    // Two requests in one write: /items is answered while /stall holds the connection, so its
    // response waits in Node's queue and is never given the socket.
    const socket = connect(Number(port), hostname, () => {
      socket.write('GET /stall HTTP/1.1\r\nHost: x\r\n\r\nGET /items HTTP/1.1\r\nHost: x\r\n\r\n');
    });
    socket.on('error', () => undefined);
    await until(() => app.handled() === 2);
    expect(app.handled()).toBe(2);
    socket.destroy();
    await until(() => app.abandoned() > 0);
    let tokens = 0;
    for (let i = 0; i < 100 && tokens !== 3; i++) {
      await sleep(10);
      tokens = await tokensIn(store, '127.0.0.1', [API]);
    }
    // /stall's token comes back; /items's too where the adapter sees its client leave (see
    // `seesQueuedClientLeave`), and once only: the request's close and its response's, both seen.
    const back = adapter.seesQueuedClientLeave ? 2 : 1;
    expect(tokens).toBe(1 + back);
    expect(reward.mock.calls).toEqual(Array.from({ length: back }, () => ['127.0.0.1', 1]));
  });

  it('a pipelined request whose client left before either decision came: skipFailedRequests gives both back', async () => {
    const store = new SlowStore(200);
    const limiter = new RequestLimiter({ store, limits: API, failurePolicy: 'open', timeoutMs: 5000 });
    closers.push(() => limiter.close());
    const reward = vi.spyOn(limiter, 'reward');
    const app = await adapter.start({ limiter, skipFailedRequests: true } as ContractOptions);
    const { hostname, port } = new URL(app.url);
    const socket = connect(Number(port), hostname, () => {
      socket.write('GET /stall HTTP/1.1\r\nHost: x\r\n\r\nGET /items HTTP/1.1\r\nHost: x\r\n\r\n');
    });
    socket.on('error', () => undefined);
    await sleep(50);
    socket.destroy();
    // Both decisions land 150 ms later, admitted: /stall's on a response that closed with the
    // socket, /items's on one still queued behind it, never given the socket, whose request's
    // 'close' has been and gone (see `seesQueuedLeaveBeforeDecision`).
    const back = adapter.seesQueuedLeaveBeforeDecision ? 2 : 1;
    await until(() => reward.mock.calls.length === back);
    // Both decisions are in: /items's handler has run (its `finish` counted the 200) or its reward came.
    await until(() => app.handled() === 2);
    expect(reward.mock.calls).toEqual(Array.from({ length: back }, () => ['127.0.0.1', 1]));
    expect(await tokensIn(store, '127.0.0.1', [API])).toBe(1 + back);
  });

  it('a limiter closed while a response runs: the refund warns, nothing throws', async () => {
    const limiter = new RequestLimiter({ store: new MemoryStore(), limits: API, failurePolicy: 'open' });
    const app = await adapter.start({ limiter, skipFailedRequests: true } as ContractOptions);
    const warnings: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => warnings.push(warning.code ?? '');
    process.on('warning', onWarning);
    try {
      const gone = new AbortController();
      const asked = fetch(`${app.url}/stall`, { signal: gone.signal }).catch(() => undefined);
      await until(() => app.handled() > 0);
      await limiter.close();
      gone.abort();
      await asked;
      await until(() => app.abandoned() > 0);
      await sleep(20);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).toContain('TL_HTTP_REWARD_FAILED');
  });
});

describe('node:http, whose app routes by `new URL(req.url, base)` as Node documents', () => {
  const node = ADAPTERS.find((adapter) => adapter.name === 'node:http')!;

  it('a spelling the URL parser resolves to a route meets its limit', async () => {
    const { url } = await node.start({ routes: { 'POST /login': oneLoginAMinute() } } as ContractOptions);
    // Each reaches the app as /login: the authority of `//evil`, and the dot segments, are read away.
    const spellings = ['//evil/login', '/x/../login', '/x/%2e%2E/login', '/\\evil/login', '/./login'];
    expect(await statusesOf(url, 'POST', ['/login', ...spellings])).toEqual([200, 429, 429, 429, 429, 429]);
  });
});

describe('node:http, a request the server times out', () => {
  it('skipFailedRequests gives its token back, as for a client that left', async () => {
    const store = new MemoryStore();
    const limiter = new RequestLimiter({ store, limits: API, failurePolicy: 'open' });
    closers.push(() => limiter.close());
    const rateLimit = createRateLimit({ limiter, skipFailedRequests: true });
    // Admits and never answers: the server's timeout destroys the connection.
    const server = createServer(async (req, res) => {
      await rateLimit(req, res);
    });
    server.setTimeout(100);
    const app = await listen(server);
    closers.push(() => app.close());
    const { hostname, port } = new URL(app.url);
    const socket = connect(Number(port), hostname, () => socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('close', resolve));
    let tokens = 0;
    for (let i = 0; i < 100 && tokens !== 3; i++) {
      await sleep(10);
      tokens = await tokensIn(store, '127.0.0.1', [API]);
    }
    expect(tokens).toBe(3);
  });
});
