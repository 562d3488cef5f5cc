// One instance of a fleet: its own connection and limiter, from the BUILT packages, as a
// service would run. Reads its orders as JSON from argv[2]; prints one JSON line of results.
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { defineLimit } from '@tiered-limiter/core';
import { createRedisLimiter, createTieredLimiter, recommendedRedisOptions } from '@tiered-limiter/redis';
import { Redis } from 'ioredis';

const orders = JSON.parse(process.argv[2]);
const redis = new Redis(orders.url, { ...recommendedRedisOptions, lazyConnect: true });
await redis.connect();

const options = {
  redis,
  prefix: orders.prefix,
  limits: defineLimit({ capacity: orders.capacity, refillPerSecond: orders.refillPerSecond }),
  failurePolicy: 'closed',
  instances: orders.instances,
  ...(orders.lease ? { lease: orders.lease, sync: false } : {}),
};
const limiter = orders.tier === 'request' ? createRedisLimiter(options) : createTieredLimiter(options);

const admittedAt = [];
let decisions = 0;
let lateMs = 0;
const pauseMs = orders.requestsPerSecond ? 1000 / orders.requestsPerSecond : 0;

await new Promise((resolve) => setTimeout(resolve, Math.max(0, orders.startAt - Date.now())));
const end = orders.startAt + orders.durationMs;

async function hammer() {
  while (Date.now() < end && decisions < orders.maxDecisions) {
    const d = limiter.tryConsume?.(orders.key) ?? (await limiter.consume(orders.key));
    decisions++;
    if (d.allowed) admittedAt.push(Date.now());
    // A real service yields between requests; a loop that never did would starve the refills.
    if ((decisions & 127) === 0) await yieldToLoop();
  }
}

async function paced() {
  let next = orders.startAt;
  while (Date.now() < end && decisions < orders.maxDecisions) {
    const before = Date.now();
    const d = await limiter.consume(orders.key);
    decisions++;
    lateMs = Math.max(lateMs, Date.now() - before);
    if (d.allowed) admittedAt.push(Date.now());
    next += pauseMs;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - Date.now())));
  }
}

await Promise.all(Array.from({ length: orders.concurrency ?? 1 }, () => (pauseMs ? paced() : hammer())));
const stats = limiter.stats();
await limiter.close();
redis.disconnect();
process.stdout.write(`${JSON.stringify({ decisions, admittedAt, stats, lateMs })}\n`);
