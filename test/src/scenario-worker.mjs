// One instance of a scripted fleet scenario: its own connection and two-tier limiter, from the
// BUILT packages, as a service would run. Reads its orders as JSON from argv[2]: a limit, limiter
// options, and steps timed from a shared start (wall clock, the one clock every process shares):
//   { at, do: 'consume', count }        `count` requests back to back (hot path, else the promise)
//   { at, do: 'hammer', forMs }         requests back to back for `forMs`, yielding every 128
//   { at, do: 'block', forMs, thenRequests }  a busy loop: this event loop does nothing else for `forMs`;
//                                       then `thenRequests` requests at once, before any timer can fire
// Prints one JSON line: every admission's wall-clock stamp, decisions, tiers, and stats().
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { defineLimit } from '@tiered-limiter/core';
import { createTieredLimiter, recommendedRedisOptions } from '@tiered-limiter/redis';
import { Redis } from 'ioredis';

const orders = JSON.parse(process.argv[2]);
const redis = new Redis(orders.url, { ...recommendedRedisOptions, lazyConnect: true });
await redis.connect();
const limiter = createTieredLimiter({
  redis,
  prefix: orders.prefix,
  limits: defineLimit({ capacity: orders.capacity, refillPerSecond: orders.refillPerSecond }),
  failurePolicy: 'closed',
  ...orders.options,
});

const admittedAt = [];
const tiers = {};
let decisions = 0;

function record(d) {
  decisions++;
  const tier = `${d.tier}:${d.allowed ? 'allowed' : 'denied'}`;
  tiers[tier] = (tiers[tier] ?? 0) + 1;
  if (d.allowed) admittedAt.push(Date.now());
}

async function decide() {
  record(limiter.tryConsume(orders.key) ?? (await limiter.consume(orders.key)));
}

const sleepUntil = (wallMs) =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, wallMs - Date.now())));

for (const step of orders.steps) {
  await sleepUntil(orders.startAt + step.at);
  if (step.do === 'consume') {
    for (let i = 0; i < step.count; i++) await decide();
  } else if (step.do === 'hammer') {
    const end = Date.now() + step.forMs;
    while (Date.now() < end) {
      await decide();
      if ((decisions & 127) === 0) await yieldToLoop();
    }
  } else if (step.do === 'block') {
    const end = performance.now() + step.forMs;
    while (performance.now() < end) {
      // A CPU-bound handler, a long GC: nothing else runs on this thread meanwhile.
    }
    for (let i = 0; i < (step.thenRequests ?? 0); i++) {
      const d = limiter.tryConsume(orders.key);
      if (d !== undefined) record(d);
    }
  }
}

const stats = limiter.stats();
await limiter.close();
redis.disconnect();
process.stdout.write(`${JSON.stringify({ admittedAt, decisions, tiers, stats })}\n`);
