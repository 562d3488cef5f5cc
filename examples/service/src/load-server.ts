/**
 * One server for `load.ts`: `GET /api/items` behind the limiter `MODE` names, keyed by the
 * `x-client` header, with a limit no request reaches, so that the load measures what the
 * limiter costs per request rather than denials. Prints `listening URL`.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type LimitSpec, perSecond } from '@tiered-limiter/core';
import { createRateLimit, type HttpLimiter } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
import { Redis } from 'ioredis';

/** Far above what one process can serve: nothing is denied. */
const UNREACHED: LimitSpec = perSecond(1_000_000, { name: 'load' });

export type LoadMode = 'none' | 'tiered-redis' | 'request-redis' | 'request-memory';

const mode = (process.env.MODE ?? 'none') as LoadMode;
const body = JSON.stringify({ items: ['apple', 'pear', 'plum'] });

let redis: Redis | undefined;
let limiter: (HttpLimiter & { close(): Promise<void> }) | undefined;
if (mode === 'tiered-redis' || mode === 'request-redis') {
  redis = new Redis(process.env.REDIS_URL!, recommendedRedisOptions);
  // Connection errors reach the limiter as failed calls (its policy decides); ioredis also emits
  // them as events, which would be printed as unhandled without a listener.
  redis.on('error', () => {});
  await once(redis, 'ready');
  const store = new RedisStore({ redis, prefix: process.env.LIMIT_PREFIX ?? 'load' });
  limiter =
    mode === 'tiered-redis'
      ? new TieredLimiter({ store, limits: UNREACHED, failurePolicy: 'open', instances: 1 })
      : new RequestLimiter({ store, limits: UNREACHED, failurePolicy: 'open' });
} else if (mode === 'request-memory') {
  limiter = new RequestLimiter({ store: new MemoryStore(), limits: UNREACHED, failurePolicy: 'open' });
}
const rateLimit = limiter && createRateLimit({ limiter, key: (req) => String(req.headers['x-client']) });

function items(res: ServerResponse): void {
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

const server = createServer(
  rateLimit
    ? async (req: IncomingMessage, res: ServerResponse) => {
        if (await rateLimit(req, res)) items(res);
      }
    : (_req: IncomingMessage, res: ServerResponse) => items(res),
);
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const address = server.address();
console.log(`listening http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`);

process.once('SIGTERM', async () => {
  server.close();
  server.closeAllConnections();
  await limiter?.close();
  // Redis may be gone already (the load runner stops it): quit() would reject on a closed connection.
  redis?.disconnect();
  process.exit(0);
});
