import { afterAll, beforeAll } from 'vitest';
import { type RedisServer, startRedis } from './redis-server.js';

/**
 * A Redis server of the calling test file's own (`startRedis()`), started in its `beforeAll` and
 * stopped in its `afterAll`. Called at the top of the file; the server it returns answers from the
 * first hook on, so that a test reads `redis.url` as if it had started the server itself.
 */
export function redisForFile(): RedisServer {
  let started: RedisServer | undefined;
  beforeAll(async () => {
    started = await startRedis();
  });
  afterAll(() => started?.stop());
  const server = (): RedisServer => {
    if (started === undefined)
      throw new Error("the file's Redis starts in beforeAll: use it in a test or hook");
    return started;
  };
  return {
    get source() {
      return server().source;
    },
    get url() {
      return server().url;
    },
    get host() {
      return server().host;
    },
    get port() {
      return server().port;
    },
    client: (options) => server().client(options),
    stop: () => server().stop(),
    restart: () => server().restart(),
    kill: () => server().kill(),
  };
}
