import { perMinute } from '@tiered-limiter/core';
import { fetchRateLimit } from '@tiered-limiter/http';
import { createRedisLimiter, recommendedRedisOptions, whenReady } from '@tiered-limiter/redis';
import { Redis } from 'ioredis';

// The process's connection and limiters, made on the first request, not at import: `next build`
// imports route modules to collect their data, and a build machine has no Redis.
let connected;
const made = new Map();

/**
 * The rate limit named `name`: `perMinuteCount` a minute per client, exact on Redis, keyed by the
 * address in `X-Forwarded-For` (Next.js's server sets it to the socket's address when a request
 * has none), with `options` for `fetchRateLimit`. The first call waits until the connection is
 * ready: with the recommended options a command sent before then fails at once, and the policy
 * decides.
 */
export function rateLimit(name, perMinuteCount, options = {}) {
  connected ??= (async () => {
    const redis = new Redis(process.env.REDIS_URL, recommendedRedisOptions);
    await whenReady(redis);
    return redis;
  })();
  if (!made.has(name)) {
    made.set(
      name,
      connected.then((redis) => {
        const limiter = createRedisLimiter({
          redis,
          prefix: `${process.env.TL_PREFIX}-${name}`,
          limits: perMinute(perMinuteCount, { name }),
          failurePolicy: 'open',
        });
        return fetchRateLimit({ limiter, trustProxy: 1, ...options });
      }),
    );
  }
  return made.get(name);
}
