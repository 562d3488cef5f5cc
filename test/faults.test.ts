import { type Decision, defineLimit, type FailurePolicy } from '@tiered-limiter/core';
import type { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { createRedisLimiter, createTieredLimiter, recommendedRedisOptions } from '@tiered-limiter/redis';
import { type RedisServer, startRedis, uniquePrefix, whenReady } from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

// Faults are real: the server is paused, killed, restarted, its scripts flushed. Budgets carry
// a margin a loaded 2-core machine keeps: a decision while Redis is away comes back within the
// timeout plus tens of milliseconds, never seconds.
const TIMEOUT_MS = 20;
const LATENCY_BUDGET_MS = TIMEOUT_MS + 60;
const RECOVERY_BUDGET_MS = 2000;
const LIMIT = defineLimit({ capacity: 40, refillPerSecond: 20 });
const INSTANCES = 4; // the local fallback admits 40 / 4 = 10 per key at once, then 5/s

let server: RedisServer;
const clients: Redis[] = [];
const limiters: (TieredLimiter | RequestLimiter)[] = [];
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  server = await startRedis();
  process.on('unhandledRejection', onUnhandled);
});
afterEach(async () => {
  await Promise.all(limiters.splice(0).map((l) => l.close()));
  for (const c of clients.splice(0)) c.disconnect();
  expect(unhandled).toEqual([]);
});
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  await server.stop();
});

async function connect(): Promise<Redis> {
  const client = server.client({ ...recommendedRedisOptions });
  clients.push(client);
  await whenReady(client);
  return client;
}

async function tiered(policy: FailurePolicy): Promise<TieredLimiter> {
  const limiter = createTieredLimiter({
    redis: await connect(),
    prefix: uniquePrefix('fault'),
    limits: LIMIT,
    failurePolicy: policy,
    instances: INSTANCES,
    timeoutMs: TIMEOUT_MS,
  });
  limiters.push(limiter);
  return limiter;
}

async function perRequest(policy: 'open' | 'closed'): Promise<RequestLimiter> {
  const limiter = createRedisLimiter({
    redis: await connect(),
    prefix: uniquePrefix('fault'),
    limits: LIMIT,
    failurePolicy: policy,
    timeoutMs: TIMEOUT_MS,
  });
  limiters.push(limiter);
  return limiter;
}

interface Timed {
  decision: Decision;
  ms: number;
}

/** Decides `count` times in a row, timing each; `key(i)` picks the key. Bounded by count. */
async function drive(limiter: TieredLimiter | RequestLimiter, count: number, key: (i: number) => string) {
  const out: Timed[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    const decision = await limiter.consume(key(i));
    out.push({ decision, ms: performance.now() - start });
  }
  return out;
}

/** Decides on fresh keys until one is answered by Redis again; returns how long that took. */
async function msUntilRedisAnswers(limiter: TieredLimiter | RequestLimiter, label: string): Promise<number> {
  const start = performance.now();
  for (let i = 0; performance.now() - start < RECOVERY_BUDGET_MS + 3000; i++) {
    const d = await limiter.consume(`${label}-${i}`);
    if (d.tier !== 'fallback') return performance.now() - start;
    await new Promise((r) => setTimeout(r, 10));
  }
  return Number.POSITIVE_INFINITY;
}

function expectByPolicy(timed: Timed[], policy: FailurePolicy) {
  const fallback = timed.filter((t) => t.decision.tier === 'fallback');
  expect(fallback.length).toBeGreaterThan(0);
  for (const { decision } of fallback) {
    expect(decision.policy).toBe(policy);
    expect(decision.error?.code).toMatch(/^ERR_TL_(STORE|STORE_TIMEOUT|CIRCUIT_OPEN)$/);
    if (policy === 'open') expect(decision.allowed).toBe(true);
    if (policy === 'closed') expect(decision.allowed).toBe(false);
  }
  const sorted = timed.map((t) => t.ms).sort((a, b) => a - b);
  const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!;
  console.info(
    `${policy}: ${timed.length} decisions while Redis was away, p99 ${p99.toFixed(1)} ms, max ${sorted.at(-1)!.toFixed(1)} ms`,
  );
  for (const { ms } of timed) expect(ms).toBeLessThanOrEqual(LATENCY_BUDGET_MS);
}

describe.each(['open', 'closed', 'local'] as const)(
  'TieredLimiter, failurePolicy %s, on a real Redis fault',
  (policy) => {
    it('CLIENT PAUSE: every decision within the timeout, by policy; back on Redis within 2 s', async () => {
      const limiter = await tiered(policy);
      await drive(limiter, 5, (i) => `warm-${i}`);
      const admin = await connect();
      await admin.call('CLIENT', 'PAUSE', '1000');
      const during = await drive(limiter, 40, (i) => `paused-${i}`);
      expectByPolicy(during, policy);
      if (policy === 'local') {
        // One key, hammered while paused: no more than the local share (40 / 4 = 10 at once).
        const hammered = await drive(limiter, 30, () => 'paused-hot');
        expect(hammered.filter((t) => t.decision.allowed).length).toBeLessThanOrEqual(10 + 1);
      }
      expect(await msUntilRedisAnswers(limiter, 'after-pause')).toBeLessThanOrEqual(
        RECOVERY_BUDGET_MS + 1000,
      );
    });

    it('killed, then restarted: decisions by policy while it is gone, from Redis once it is back', async () => {
      const limiter = await tiered(policy);
      await drive(limiter, 5, (i) => `warm-${i}`);
      await server.kill();
      const during = await drive(limiter, 40, (i) => `down-${i}`);
      expectByPolicy(during, policy);
      await server.restart();
      const restartedAt = performance.now();
      const ms = await msUntilRedisAnswers(limiter, 'after-restart');
      console.info(
        `${policy}: back on Redis ${Math.round(ms)} ms after restart (${Math.round(performance.now() - restartedAt)})`,
      );
      expect(ms).toBeLessThanOrEqual(RECOVERY_BUDGET_MS);
    });
  },
);

describe('SCRIPT FLUSH', () => {
  it('costs no decision: ioredis reloads the script on NOSCRIPT', async () => {
    const tieredLimiter = await tiered('closed');
    const requestLimiter = await perRequest('closed');
    await drive(tieredLimiter, 3, (i) => `a-${i}`);
    await drive(requestLimiter, 3, (i) => `a-${i}`);
    await (await connect()).script('FLUSH');
    const after = [
      ...(await drive(tieredLimiter, 5, (i) => `b-${i}`)),
      ...(await drive(requestLimiter, 5, (i) => `b-${i}`)),
    ];
    for (const { decision } of after) expect(decision).toMatchObject({ allowed: true, tier: 'global' });
  });
});

describe.each(['open', 'closed'] as const)(
  'RequestLimiter, failurePolicy %s, on a real Redis fault',
  (policy) => {
    it('CLIENT PAUSE and a kill: within the timeout, by policy, and back', async () => {
      const limiter = await perRequest(policy);
      await drive(limiter, 3, (i) => `warm-${i}`);
      await (await connect()).call('CLIENT', 'PAUSE', '1000');
      expectByPolicy(await drive(limiter, 30, (i) => `paused-${i}`), policy);
      expect(await msUntilRedisAnswers(limiter, 'after-pause')).toBeLessThanOrEqual(
        RECOVERY_BUDGET_MS + 1000,
      );
      await server.kill();
      expectByPolicy(await drive(limiter, 30, (i) => `down-${i}`), policy);
      await server.restart();
      expect(await msUntilRedisAnswers(limiter, 'after-restart')).toBeLessThanOrEqual(RECOVERY_BUDGET_MS);
    });
  },
);
