import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRateLimit } from '@tiered-limiter/http';
import { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
import { Redis } from 'ioredis';
import { CLOSED_ROUTE_TIMEOUT_MS, ITEMS, LOGIN, REPORT, reportCost } from './limits.js';

/** How long a process waits for its first connection to Redis before giving up. */
const REDIS_READY_TIMEOUT_MS = 10_000;

/** What one process of the service needs to know. */
export interface ServiceOptions {
  /** The Redis every process shares. */
  redisUrl: string;
  /** Starts every Redis key of this service. */
  prefix: string;
  /** Processes sharing the limits (sizes the two-tier limiter's leases). */
  instances: number;
  host: string;
  port: number;
  /** Every limiter's store timeout, in ms, when set: else each route's own (see `limits.ts`). */
  storeTimeoutMs?: number;
}

/** One running process of the service. */
export interface Service {
  readonly server: Server;
  /** Stops taking connections, returns leased tokens, and disconnects from Redis. */
  close(): Promise<void>;
}

/** Starts one process of the service: its Redis client, its limiters, its HTTP server. */
export async function startService(options: ServiceOptions): Promise<Service> {
  const redis = new Redis(options.redisUrl, recommendedRedisOptions);
  // ioredis emits every failed reconnect as an `error` event and, with no listener, prints each
  // with its stack (one a second per process through an outage). The limiters' `degraded` and
  // `recovered` events below say what an outage means for the limits, once each.
  redis.on('error', () => {});
  // With the offline queue off, a command sent before the connection is up fails at once: wait.
  await whenReady(redis, REDIS_READY_TIMEOUT_MS);
  const store = new RedisStore({ redis, prefix: options.prefix });
  const closedTimeoutMs = options.storeTimeoutMs ?? CLOSED_ROUTE_TIMEOUT_MS;

  const login = new RequestLimiter({
    store,
    limits: LOGIN,
    failurePolicy: 'closed',
    timeoutMs: closedTimeoutMs,
  });
  const items = new TieredLimiter({
    store,
    limits: ITEMS,
    failurePolicy: 'open',
    instances: options.instances,
    ...(options.storeTimeoutMs === undefined ? {} : { timeoutMs: options.storeTimeoutMs }),
  });
  const report = new RequestLimiter({
    store,
    limits: REPORT,
    failurePolicy: 'closed',
    timeoutMs: closedTimeoutMs,
  });
  for (const limiter of [login, items, report]) {
    limiter.on('degraded', (error) =>
      console.warn(`[${process.pid}] Redis unavailable, limits fall back: ${error.message}`),
    );
    limiter.on('recovered', ({ downMs }) =>
      console.warn(`[${process.pid}] Redis back after ${Math.round(downMs)} ms`),
    );
  }

  // What each limiter of this process has decided and holds (`stats()`), for `GET /metrics`.
  const metrics = () => ({
    pid: process.pid,
    login: login.stats(),
    items: items.stats(),
    report: report.stats(),
  });

  // Requests are keyed by client IP (the default). `/health`, `/metrics` and unknown paths are not limited.
  const rateLimit = createRateLimit({
    routes: {
      'POST /login': login,
      'GET /api/items': items,
      'GET /api/report': { limiter: report, cost: (req) => reportCost(daysOf(req)) },
    },
  });

  const server = createServer(async (req, res) => {
    res.setHeader('X-Served-By', String(process.pid));
    try {
      if (!(await rateLimit(req, res))) return;
      const [status, body] = route(req, metrics);
      send(res, status, body);
    } catch (error) {
      send(res, 500, { error: String(error) });
    }
  });
  server.listen(options.port, options.host);
  await once(server, 'listening');

  return {
    server,
    close: async () => {
      const closed = new Promise((resolve) => server.close(resolve));
      server.closeIdleConnections();
      await closed;
      const before = items.stats();
      // The two-tier limiter hands its unspent leased tokens back to Redis here: without it they
      // stay out of the shared bucket until their lease ends.
      await Promise.all([login.close(), items.close(), report.close()]);
      const after = items.stats();
      const handedBack = after.tokensRefunded - before.tokensRefunded;
      const unreported = after.tokensUnreported - before.tokensUnreported;
      console.log(
        `[${process.pid}] closed: ${handedBack} unspent leased tokens handed back` +
          (unreported > 0 ? `, ${unreported} not reported (Redis unreachable)` : ''),
      );
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** The API itself: a status and a JSON body. `metrics` reads this process's limiters. */
function route(req: IncomingMessage, metrics: () => unknown): [status: number, body: unknown] {
  const path = new URL(req.url ?? '/', 'http://localhost').pathname;
  const endpoint = `${req.method} ${path}`;
  switch (endpoint) {
    case 'POST /login':
      return [200, { token: 'demo-token' }];
    case 'GET /api/items':
      return [200, { items: ['apple', 'pear', 'plum'] }];
    case 'GET /api/report': {
      const days = daysOf(req);
      if (!Number.isInteger(days) || days < 1 || days > 366) return [400, { error: 'days: 1 to 366' }];
      return [200, { days, cost: reportCost(days), rows: days }];
    }
    case 'GET /health':
      return [200, { ok: true }];
    case 'GET /metrics':
      return [200, metrics()];
    default:
      return [404, { error: 'not found' }];
  }
}

function daysOf(req: IncomingMessage): number {
  return Number(new URL(req.url ?? '/', 'http://localhost').searchParams.get('days') ?? 7);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(json) });
  res.end(json);
}

function whenReady(redis: Redis, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.disconnect();
      reject(new Error(`Redis not ready in ${timeoutMs} ms`));
    }, timeoutMs);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
