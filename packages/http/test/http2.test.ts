/**
 * The HTTP/2 compatibility API (`http2.createServer`; Fastify with `http2: true`), over real HTTP/2
 * sessions on 127.0.0.1: `skipFailedRequests` gives back the tokens of a request whose client reset
 * its stream, left before the decision came, dropped the connection, or that the server timed out;
 * `skipSuccessfulRequests` gives back a response delivered whole and nothing else.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type ClientHttp2Session,
  type ClientHttp2Stream,
  connect,
  constants,
  createServer,
  type Http2Server,
  type ServerHttp2Session,
} from 'node:http2';
import type { AddressInfo } from 'node:net';
import { defineLimit, type GlobalStore } from '@tiered-limiter/core';
import { createRateLimit, fastifyRateLimit, type RateLimitOptions } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import Fastify, { type FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { SlowStore, tokensIn } from './helpers.js';
import { closeAfterEach } from './teardown.js';

const API = defineLimit({ capacity: 3, refillPerSecond: 0.001, name: 'api' });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const sessions: ClientHttp2Session[] = [];
const servers: (() => Promise<void>)[] = [];
const closers: (() => Promise<void>)[] = [];
const sessionClosers = [
  async () => {
    for (const session of sessions.splice(0)) session.destroy();
  },
];
closeAfterEach(sessionClosers, servers, closers);

/** Waits until `done()` holds, 5 s at most; answers whether it did. */
async function until(done: () => boolean | Promise<boolean>): Promise<boolean> {
  for (let i = 0; i < 500; i++) {
    if (await done()) return true;
    await sleep(10);
  }
  return false;
}

/** A running HTTP/2 app: its session, and how many requests its handlers ran. */
interface Http2App {
  readonly session: ClientHttp2Session;
  readonly handled: () => number;
}

/** A limiter on `store`, closed after the test. */
function limiterOn(store: GlobalStore): RequestLimiter {
  const limiter = new RequestLimiter({ store, limits: API, failurePolicy: 'open', timeoutMs: 5000 });
  closers.push(() => limiter.close());
  return limiter;
}

/** The status a path is answered with: N for `/status/N`, else 200; `undefined` for `/stall`, never answered. */
function statusFor(path: string): number | undefined {
  if (path === '/stall') return undefined;
  const match = /^\/status\/(\d{3})$/.exec(path);
  return match ? Number(match[1]) : 200;
}

/** A client session to `url`, destroyed after the test. */
function sessionTo(url: string): ClientHttp2Session {
  const session = connect(url);
  session.on('error', () => undefined);
  sessions.push(session);
  return session;
}

/** `http2.createServer` limited by `createRateLimit(options)`; `configure` sees the server first. */
async function nodeHttp2(
  options: RateLimitOptions,
  configure: (server: Http2Server) => void = () => undefined,
): Promise<Http2App> {
  const rateLimit = createRateLimit(options);
  let handled = 0;
  const server = createServer(async (req, res) => {
    // The compat objects carry what the middleware reads of Node's HTTP/1 ones.
    if (!(await rateLimit(req as unknown as IncomingMessage, res as unknown as ServerResponse))) return;
    handled++;
    const status = statusFor(req.url);
    if (status === undefined) return;
    res.statusCode = status;
    res.end('ok');
  });
  configure(server);
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  // close() waits for every session to end: end the server's own too, as closeAllConnections() does.
  const open = new Set<ServerHttp2Session>();
  server.on('session', (session) => {
    open.add(session);
    session.once('close', () => open.delete(session));
  });
  servers.push(async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const session of open) session.destroy();
    await closed;
  });
  const { port } = server.address() as AddressInfo;
  return { session: sessionTo(`http://127.0.0.1:${port}`), handled: () => handled };
}

/** Fastify over cleartext HTTP/2, limited by `fastifyRateLimit(options)`. */
async function fastifyHttp2(options: RateLimitOptions): Promise<Http2App> {
  const app: FastifyInstance = Fastify({ http2: true, forceCloseConnections: true }) as never;
  servers.push(() => app.close());
  app.addHook('onRequest', fastifyRateLimit(options as never) as never);
  let handled = 0;
  // A synchronous handler that never sends leaves the stream open: /stall.
  app.get('/*', (request, reply) => {
    handled++;
    const status = statusFor(request.url);
    if (status !== undefined) reply.code(status).send('ok');
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { session: sessionTo(url), handled: () => handled };
}

/** Sends GET `path` on `session`; the stream, and a promise of its status (0 if it never came). */
function get(
  session: ClientHttp2Session,
  path: string,
): { stream: ClientHttp2Stream; status: Promise<number> } {
  const stream = session.request({ ':path': path });
  stream.on('error', () => undefined);
  const status = new Promise<number>((resolve) => {
    let seen = 0;
    stream.on('response', (headers) => {
      seen = Number(headers[':status']);
    });
    stream.on('close', () => resolve(seen));
    stream.resume();
  });
  return { stream, status };
}

describe.each([
  ['http2.createServer', nodeHttp2],
  ['Fastify http2', (options: RateLimitOptions) => fastifyHttp2(options)],
] as const)('the HTTP/2 compatibility API, %s', (_name, start) => {
  it('skipFailedRequests: a client that resets its stream mid-response gets its token back', async () => {
    const store = new MemoryStore();
    const app = await start({ limiter: limiterOn(store), skipFailedRequests: true });
    const { stream } = get(app.session, '/stall');
    expect(await until(() => app.handled() === 1)).toBe(true);
    expect(await tokensIn(store, '127.0.0.1', [API])).toBe(2);
    stream.close(constants.NGHTTP2_CANCEL);
    expect(await until(async () => (await tokensIn(store, '127.0.0.1', [API])) === 3)).toBe(true);
  });

  it('skipFailedRequests: a client that drops the connection mid-response gets its token back', async () => {
    const store = new MemoryStore();
    const app = await start({ limiter: limiterOn(store), skipFailedRequests: true });
    get(app.session, '/stall');
    expect(await until(() => app.handled() === 1)).toBe(true);
    app.session.destroy();
    expect(await until(async () => (await tokensIn(store, '127.0.0.1', [API])) === 3)).toBe(true);
  });

  it('skipFailedRequests: a response delivered whole keeps its token, a 500 gives it back', async () => {
    const store = new MemoryStore();
    const app = await start({ limiter: limiterOn(store), skipFailedRequests: true });
    expect(await get(app.session, '/items').status).toBe(200);
    expect(await get(app.session, '/status/500').status).toBe(500);
    // The 500's refund lands after its stream closed: wait for it, then check the 200 kept its own.
    expect(await until(async () => (await tokensIn(store, '127.0.0.1', [API])) === 2)).toBe(true);
    await sleep(50);
    expect(await tokensIn(store, '127.0.0.1', [API])).toBe(2);
  });

  it('skipSuccessfulRequests: a reset stream is no success and keeps its token', async () => {
    const store = new MemoryStore();
    const app = await start({ limiter: limiterOn(store), skipSuccessfulRequests: true });
    const { stream } = get(app.session, '/stall');
    expect(await until(() => app.handled() === 1)).toBe(true);
    stream.close(constants.NGHTTP2_CANCEL);
    await new Promise((resolve) => stream.once('close', resolve));
    expect(await get(app.session, '/items').status).toBe(200);
    // The delivered /items is given back; the reset /stall is not.
    expect(await until(async () => (await tokensIn(store, '127.0.0.1', [API])) === 2)).toBe(true);
    await sleep(50);
    expect(await tokensIn(store, '127.0.0.1', [API])).toBe(2);
  });

  it('skipFailedRequests: a client gone before its decision came gets its token back', async () => {
    const store = new SlowStore(200);
    const app = await start({ limiter: limiterOn(store), skipFailedRequests: true });
    const { stream, status } = get(app.session, '/items');
    await sleep(50);
    stream.close(constants.NGHTTP2_CANCEL);
    expect(await status).toBe(0);
    // The decision lands 150 ms later, admitted, on a stream already reset: a failed response.
    expect(await until(async () => (await tokensIn(store, '127.0.0.1', [API])) === 3)).toBe(true);
  });
});

describe('http2.createServer: a request the server times out', () => {
  it('skipFailedRequests gives its token back', async () => {
    const store = new MemoryStore();
    const app = await nodeHttp2({ limiter: limiterOn(store), skipFailedRequests: true }, (server) =>
      server.setTimeout(100),
    );
    const { status } = get(app.session, '/stall');
    expect(await until(() => app.handled() === 1)).toBe(true);
    expect(await status).toBe(0);
    expect(await until(async () => (await tokensIn(store, '127.0.0.1', [API])) === 3)).toBe(true);
  });
});
