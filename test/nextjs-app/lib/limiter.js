import { perMinute } from '@tiered-limiter/core';
import { fetchRateLimit } from '@tiered-limiter/http';
import { createRedisLimiter, recommendedRedisOptions, whenReady } from '@tiered-limiter/redis';
import { Redis } from 'ioredis';

// One limiter for the process, made on the first request, not at import: `next build` imports
// route modules to collect their data, and a build machine has no Redis.
let made;

/**
 * The app's rate limit: 3 a minute per client, exact on Redis, keyed by the address in
 * `X-Forwarded-For` (Next.js's server sets it to the socket's address when a request has none),
 * counting failed responses out. The first call waits until the connection is ready: with the
 * recommended options a command sent before then fails at once, and the policy decides.
 */
export async function rateLimit() {
  made ??= (async () => {
    const redis = new Redis(process.env.REDIS_URL, recommendedRedisOptions);
    await whenReady(redis);
    const limiter = createRedisLimiter({
      redis,
      prefix: process.env.TL_PREFIX,
      limits: perMinute(3, { name: 'items' }),
      failurePolicy: 'open',
    });
    return fetchRateLimit({ limiter, trustProxy: 1, skipFailedRequests: true });
  })();
  return made;
}
