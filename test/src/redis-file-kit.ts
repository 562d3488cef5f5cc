import { recommendedRedisOptions } from '@tiered-limiter/redis';
import type { Redis, RedisOptions } from 'ioredis';
import { afterEach } from 'vitest';
import { connectServer } from './client-kinds.js';
import { whenReady } from './clients.js';
import { redisForFile } from './redis-for-file.js';
import type { RedisServer } from './redis-server.js';

/** A test file's own Redis (`redisForFile`), and what its tests open on it, closed after each test. */
export interface RedisFileKit {
  /** The file's server. */
  readonly server: RedisServer;
  /** Closes `limiter` after the test, before the clients it may still talk through. */
  track<L extends { close(): Promise<unknown> }>(limiter: L): L;
  /** An ioredis client of the server (the recommended options, then `options`), ready; disconnected after the test. */
  redis(options?: RedisOptions): Promise<Redis>;
  /** An ioredis client of the server as the harness connects one, for a factory's `redis`; closed after the test. */
  connect(): Promise<object>;
}

/**
 * `redisForFile` and the `afterEach` every file on it wrote for itself: limiters closed first
 * (a `close()` hands tokens back through the clients), then the clients. Called at the top of the file.
 */
export function redisFileKit(): RedisFileKit {
  const server = redisForFile();
  const limiters: { close(): Promise<unknown> }[] = [];
  const clients: (() => void)[] = [];
  afterEach(async () => {
    await Promise.all(limiters.splice(0).map((l) => l.close()));
    for (const close of clients.splice(0)) close();
  });
  return {
    server,
    track(limiter) {
      limiters.push(limiter);
      return limiter;
    },
    async redis(options) {
      const redis = server.client({ ...recommendedRedisOptions, ...options });
      clients.push(() => redis.disconnect());
      await whenReady(redis);
      return redis;
    },
    async connect() {
      const client = await connectServer('ioredis', server);
      clients.push(() => client.close());
      return client.client;
    },
  };
}
