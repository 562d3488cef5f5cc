// One instance of a fleet (or several, `limiters`): its own connection, and a store and limiter per
// hosted instance, from the BUILT packages (plain node, no TypeScript loader), as a service instance
// runs them. Orders come as JSON in argv[2] (`FleetOrders` in fleet.ts). Over IPC it says `ready`
// once connected, starts at the wall-clock instant it is then given, and sends back one
// `FleetReport`.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { defineLimit } from '@tiered-limiter/core';
import { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
import { Redis } from 'ioredis';

const orders = JSON.parse(process.argv[2]);
const send = (message) =>
  new Promise((resolve, reject) => process.send(message, (error) => (error ? reject(error) : resolve())));

const redis = new Redis(orders.url, { ...recommendedRedisOptions, lazyConnect: true });
redis.on('error', () => {});
await redis.connect();

const keyCount = orders.keys ?? 1;
const base = orders.key ?? 'shared';
const keys = keyCount === 1 ? [base] : Array.from({ length: keyCount }, (_, i) => `${base}:${i}`);
const hotShare = keyCount > 1 ? (orders.hotShare ?? 0) : 0;
const hosted = orders.limiters ?? 1;

/** Returns a limiter seen as `decide(key) → Decision | Promise<Decision>`, `stats()` and `close()`. */
async function makeLimiter() {
  if (orders.tier === 'rlf') {
    // rate-limiter-flexible, set up as its documentation advises (see bench/src/limiters.ts).
    const { RateLimiterMemory, RateLimiterRedis } = await import('rate-limiter-flexible');
    const { points, durationS } = orders.peer;
    const limiter = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: orders.prefix,
      points,
      duration: durationS,
      inMemoryBlockOnConsumed: points,
      insuranceLimiter: new RateLimiterMemory({ points, duration: durationS }),
    });
    const decision = (allowed) => ({ allowed, tier: 'global' });
    return {
      decide: (key) =>
        limiter.consume(key).then(
          () => decision(true),
          (reason) => {
            if (reason instanceof Error) throw reason;
            return decision(false);
          },
        ),
      stats: () => undefined,
      close: async () => {},
    };
  }
  const store = new RedisStore({ redis, prefix: orders.prefix, ...orders.storeOptions });
  const options = {
    store,
    limits: defineLimit({
      capacity: orders.capacity,
      refillPerSecond: orders.refillPerSecond,
      ...(orders.limitName ? { name: orders.limitName } : {}),
    }),
    failurePolicy: orders.failurePolicy ?? 'closed',
    // The fleet size is the two-tier limiter's option; the per-request one refuses names it does not know.
    ...(orders.tier === 'request' ? {} : { instances: orders.instances }),
    // A lease lifetime of its own means refills on demand: the periodic sync sets the lifetime itself.
    ...(orders.lease ? { lease: orders.lease, sync: false } : {}),
    // Options this worker does not know, passed through verbatim.
    ...orders.options,
  };
  const limiter = orders.tier === 'request' ? new RequestLimiter(options) : new TieredLimiter(options);
  return {
    decide: (key) => limiter.tryConsume?.(key) ?? limiter.consume(key),
    stats: () => limiter.stats(),
    storeStats: () => store.stats(),
    close: () => limiter.close(),
  };
}

// Several instances in one process share its connection; each has its own store and limiter, and
// a request goes to one of them at random, as a load balancer spreads requests.
const limiters = [];
for (let i = 0; i < hosted; i++) limiters.push(await makeLimiter());
const limiter = limiters[0];
const pick = () => (hosted === 1 ? limiter : limiters[(Math.random() * hosted) | 0]);

// Listen for the start before saying ready, so that it cannot arrive unheard.
const started = new Promise((resolve) =>
  process.once('message', (message) => message.type === 'start' && resolve(message.startAt)),
);
await send({ type: 'ready' });
const startAt = await started;
await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));

const end = startAt + orders.durationMs;
const admittedAt = [];
const admittedAtByKey = keyCount === 1 ? undefined : keys.map(() => []);
const byTier = {};
let decisions = 0;
let allowed = 0;
let fallbackAllowed = 0;
let fallbackDenied = 0;
let lateMs = 0;
/** When this worker last asked for a decision: its traffic ends there, whatever it still awaits. */
let lastRequestAt = startAt;

function record(k, d) {
  decisions++;
  byTier[d.tier] = (byTier[d.tier] ?? 0) + 1;
  if (d.tier === 'fallback') {
    // The failure policy's decision: outside the limit's bound, counted apart.
    if (d.allowed) fallbackAllowed++;
    else fallbackDenied++;
  } else if (d.allowed) {
    const now = Date.now();
    allowed++;
    admittedAt.push(now);
    admittedAtByKey?.[k].push(now);
  }
}

let cursor = 0;
let hotDebt = 0;
/**
 * The next key: the others in turn, or, with `hotShare`, key 0 for that share of the decisions
 * (spread evenly: an accumulator, not a coin) and the others in turn for the rest.
 */
function nextKey() {
  if (hotShare > 0) {
    hotDebt += hotShare;
    if (hotDebt >= 1) {
      hotDebt -= 1;
      return 0;
    }
    const k = cursor === 0 ? 1 : cursor;
    cursor = k + 1 === keyCount ? 1 : k + 1;
    return k;
  }
  const k = cursor;
  cursor = cursor + 1 === keyCount ? 0 : cursor + 1;
  return k;
}

/** Decides for the next key; a promise only when the limiter had to wait for Redis. */
function decideOnce() {
  const k = nextKey();
  const d = pick().decide(keys[k]);
  if (typeof d.then === 'function') return d.then((decision) => record(k, decision));
  record(k, d);
  return undefined;
}

async function hammer() {
  for (let now = Date.now(); now < end && decisions < orders.maxDecisions; now = Date.now()) {
    lastRequestAt = now;
    const waiting = decideOnce();
    if (waiting) await waiting;
    // A service yields between requests; a loop that never did would starve the lease refills.
    if ((decisions & 127) === 0) await yieldToLoop();
  }
}

async function paced() {
  const pauseMs = 1000 / orders.requestsPerSecond;
  let next = startAt;
  while (Date.now() < end && decisions < orders.maxDecisions) {
    const before = Date.now();
    lastRequestAt = before;
    await decideOnce();
    lateMs = Math.max(lateMs, Date.now() - before);
    next += pauseMs;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - Date.now())));
  }
}

// The period moves with the keys a round weighs (a call per 32): the bound of a run is the
// longest in force during it, not the one at its end (a starved worker held fewer keys by then).
let longestSyncPeriodMs = 0;
const watchPeriod = setInterval(() => {
  for (const l of limiters) {
    const period = l.stats()?.syncPeriodMs;
    if (typeof period === 'number' && period > longestSyncPeriodMs) longestSyncPeriodMs = period;
  }
}, 5);
const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();
const loops = Array.from({ length: orders.concurrency ?? 1 }, () =>
  orders.requestsPerSecond ? paced() : hammer(),
);
await Promise.all(loops);
loop.disable();
const endedAt = Date.now();
clearInterval(watchPeriod);
const limiterStats = limiters.map((l) => l.stats());
for (const stats of limiterStats) {
  const period = stats?.syncPeriodMs;
  if (typeof period === 'number' && period > longestSyncPeriodMs) longestSyncPeriodMs = period;
}
const storeStats = { calls: 0, ops: 0, keys: 0 };
for (const l of limiters) {
  const s = l.storeStats?.();
  if (s) for (const field of Object.keys(storeStats)) storeStats[field] += s[field] ?? 0;
}
await Promise.all(limiters.map((l) => l.close()));
redis.disconnect();
const ms = (ns) => ns / 1e6;
await send({
  type: 'report',
  report: {
    decisions,
    allowed,
    denied: decisions - allowed - fallbackAllowed - fallbackDenied,
    fallback: { allowed: fallbackAllowed, denied: fallbackDenied },
    byTier,
    admittedAt,
    ...(admittedAtByKey ? { admittedAtByKey } : {}),
    lateMs,
    loopDelayMs: { p50: ms(loop.percentile(50)), p99: ms(loop.percentile(99)), max: ms(loop.max) },
    startedAt: startAt,
    lastRequestAt,
    endedAt,
    stats: limiterStats[0],
    limiterStats,
    longestSyncPeriodMs,
    storeStats: orders.tier === 'rlf' ? undefined : storeStats,
  },
});
process.disconnect();
