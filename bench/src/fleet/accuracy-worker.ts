// One process of the accuracy fleet: its own connection and limiter, from the built packages, as
// a service instance runs them. Orders come as JSON in argv[2]; over IPC it says `ready` once
// connected, starts at the wall-clock instant it is then given, and sends back one report.
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { defineLimit } from '@tiered-limiter/core';
import { createRedisLimiter, createTieredLimiter, recommendedRedisOptions } from '@tiered-limiter/redis';
import { Redis } from 'ioredis';
import { rlfRedis } from '../limiters.js';
import type { AccuracyOrders, AccuracyReport, ParentMessage } from './protocol.js';

const send = (message: unknown) =>
  new Promise<void>((resolve, reject) =>
    process.send!(message, (error: Error | null) => (error ? reject(error) : resolve())),
  );

const orders = JSON.parse(process.argv[2]!) as AccuracyOrders;

const redis = new Redis(orders.url, { ...recommendedRedisOptions, lazyConnect: true });
redis.on('error', () => {});
await redis.connect();

const limit = defineLimit({
  capacity: orders.capacity,
  refillPerSecond: orders.refillPerSecond,
  name: 'shared',
});
let decide: (key: string) => boolean | Promise<boolean>;
let close: () => Promise<void> = async () => {};
let stats: () => unknown = () => undefined;
if (orders.tier === 'rlf') {
  decide = rlfRedis(redis, orders.prefix, orders.peer).decider.async;
} else {
  const options = {
    redis,
    prefix: orders.prefix,
    limits: limit,
    failurePolicy: 'closed' as const,
    instances: orders.instances,
    lease: { ttlMs: orders.leaseTtlMs },
  };
  if (orders.tier === 'request') {
    const limiter = createRedisLimiter(options);
    decide = async (key) => (await limiter.consume(key)).allowed;
    close = () => limiter.close();
    stats = () => limiter.stats();
  } else {
    const limiter = createTieredLimiter(options);
    decide = (key) => {
      const fast = limiter.tryConsume(key);
      return fast === undefined ? limiter.consume(key).then((d) => d.allowed) : fast.allowed;
    };
    close = () => limiter.close();
    stats = () => limiter.stats();
  }
}

// Listen for the start before saying ready, so that it cannot arrive unheard.
const started = new Promise<number>((resolve) =>
  process.once('message', (message: ParentMessage) => {
    if (message.type === 'start') resolve(message.startAt);
  }),
);
await send({ type: 'ready' });
const startAt = await started;
await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));

const end = startAt + orders.durationMs;
const admittedAt: number[] = [];
let decisions = 0;
while (decisions < orders.maxDecisions && Date.now() < end) {
  let allowed = decide(orders.key);
  if (typeof allowed !== 'boolean') allowed = await allowed;
  decisions++;
  if (allowed) admittedAt.push(Date.now());
  // A server yields between requests; a loop that never did would starve the lease refills.
  if ((decisions & 127) === 0) await yieldToLoop();
}
const report: AccuracyReport = { decisions, admittedAt, stats: stats() };
await close();
redis.disconnect();
await send({ type: 'report', report });
process.disconnect();
