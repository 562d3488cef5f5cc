import { defineLimit } from '@tiered-limiter/core';
import { createRedisLimiter, createTieredLimiter, recommendedRedisOptions } from '@tiered-limiter/redis';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';

const redis = new Redis({ ...recommendedRedisOptions, port: 6379 });
await new Promise((r) => redis.once('ready', r));
const limit = defineLimit({ capacity: 100, refillPerSecond: 10 });
const KEYS = 100_000,
  INFLIGHT = Number(process.argv[3] ?? 64),
  DUR = 3000;
async function run(name, decide) {
  let n = 0,
    allowed = 0,
    i = 0;
  const end = performance.now() + DUR;
  await Promise.all(
    Array.from({ length: INFLIGHT }, async () => {
      while (performance.now() < end) {
        const ok = await decide(`u${i++ % KEYS}`);
        n++;
        if (ok) allowed++;
      }
    }),
  );
  console.log(name, Math.round(n / (DUR / 1000)), '/s', 'allowed', allowed);
}
const which = process.argv[2];
if (which === 'peer') {
  const rl = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: 'p' + process.pid,
    points: 100,
    duration: 10,
  });
  await run('peer', (k) =>
    rl.consume(k).then(
      () => true,
      () => false,
    ),
  );
} else if (which === 'request') {
  const l = createRedisLimiter({
    redis,
    prefix: 'r' + process.pid,
    limits: limit,
    failurePolicy: 'open',
    timeoutMs: 1000,
  });
  await run('request', (k) => l.consume(k).then((d) => d.allowed && d.tier !== 'fallback'));
  console.log(l.stats());
} else {
  const l = createTieredLimiter({
    redis,
    prefix: 't' + process.pid,
    limits: limit,
    failurePolicy: 'open',
    timeoutMs: 1000,
  });
  await run('tiered', async (k) => {
    const d = l.tryConsume(k) ?? (await l.consume(k));
    return d.allowed && d.tier !== 'fallback';
  });
  console.log(l.stats());
}
redis.disconnect();
process.exit(0);
