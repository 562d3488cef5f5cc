import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setImmediate as yieldNow } from 'node:timers/promises';
import { defineLimit } from '@tiered-limiter/core';
import { createTieredLimiter, recommendedRedisOptions } from '@tiered-limiter/redis';
import { Redis } from 'ioredis';

const redis = new Redis({ ...recommendedRedisOptions, port: 6379 });
await new Promise((r) => redis.once('ready', r));
const l = createTieredLimiter({
  redis,
  prefix: process.argv[2],
  limits: defineLimit({ capacity: 100, refillPerSecond: 200 }),
  failurePolicy: 'closed',
  instances: 4,
});
const h = monitorEventLoopDelay({ resolution: 1 });
h.enable();
let admitted = 0,
  decisions = 0,
  n = 0,
  maxGap = 0,
  last = performance.now();
const end = performance.now() + 3000;
while (performance.now() < end) {
  const d = l.tryConsume('k') ?? (await l.consume('k'));
  decisions++;
  if (d.allowed) admitted++;
  const now = performance.now();
  if (now - last > maxGap) maxGap = now - last;
  last = now;
  if ((++n & 127) === 0) await yieldNow();
}
h.disable();
console.log(process.pid, {
  admitted,
  decisions,
  maxGapMs: maxGap.toFixed(1),
  loopDelayMaxMs: (h.max / 1e6).toFixed(1),
  stats: l.stats().decisions,
});
await l.close();
redis.disconnect();
