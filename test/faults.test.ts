import { type Decision, defineLimit, type FailurePolicy } from '@tiered-limiter/core';
import type { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import {
  createRedisLimiter,
  createTieredLimiter,
  RedisStore,
  type RedisStoreOptions,
} from '@tiered-limiter/redis';
import {
  CLIENT_KINDS,
  type ClientKind,
  connectServer,
  type KindClient,
  msUntilStoreAnswers,
  uniquePrefix,
} from '@tiered-limiter/test-harness';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { redisForFile } from './src/redis-for-file.js';

// Faults are real: the server is paused, killed, restarted, its scripts flushed. Budgets carry
// a margin a loaded 2-core machine keeps: a decision while Redis is away comes back within the
// timeout plus tens of milliseconds, never seconds.
const TIMEOUT_MS = 20;
const LATENCY_BUDGET_MS = TIMEOUT_MS + 60;
/**
 * The README's recovery promise, in its own figures: back on Redis within a breaker cooldown
 * (250 ms) plus the client's reconnect delay (at most 1 s with the recommended options), and a
 * margin for a loaded 2-core machine. A paused server keeps its connections: the pause, then a
 * cooldown at most.
 */
const COOLDOWN_MS = 250;
const RECONNECT_MAX_MS = 1000;
const RECOVERY_MARGIN_MS = 250;
const PAUSE_MS = 1000;
const BACK_AFTER_RESTART_MS = COOLDOWN_MS + RECONNECT_MAX_MS + RECOVERY_MARGIN_MS;
const BACK_AFTER_PAUSE_MS = PAUSE_MS + COOLDOWN_MS + RECOVERY_MARGIN_MS;
const LIMIT = defineLimit({ capacity: 40, refillPerSecond: 20 });
/** A bucket that refills nothing worth a token during a test, to count what ran. */
const SLOW = defineLimit({ capacity: 40, refillPerSecond: 0.001, name: 'slow' });
const INSTANCES = 4; // the local fallback admits 40 / 4 = 10 per key at once, then 5/s

const server = redisForFile();
const clients: KindClient[] = [];
const limiters: (TieredLimiter | RequestLimiter)[] = [];
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(() => {
  process.on('unhandledRejection', onUnhandled);
});
afterEach(async () => {
  await Promise.all(limiters.splice(0).map((l) => l.close()));
  for (const c of clients.splice(0)) c.close();
  expect(unhandled).toEqual([]);
});
afterAll(() => {
  process.off('unhandledRejection', onUnhandled);
});

/** The client library the limiters under test use; the admin connection is always ioredis. */
let kind: ClientKind = 'ioredis';

async function connect(): Promise<object> {
  const client = await connectServer(kind, server);
  clients.push(client);
  return client.client;
}

function admin() {
  return server.client();
}

/** What every limiter under test is given: a connection of its own, coalescing or not, and the timeout. */
async function onRedis(
  coalesce: boolean,
  prefix: string,
  timeoutMs = TIMEOUT_MS,
): Promise<RedisStoreOptions & { timeoutMs: number }> {
  return { redis: await connect(), coalesce: coalesce ? undefined : false, prefix, timeoutMs };
}

async function tiered(
  policy: FailurePolicy,
  coalesce = true,
  timeoutMs = TIMEOUT_MS,
): Promise<TieredLimiter> {
  const limiter = createTieredLimiter({
    ...(await onRedis(coalesce, uniquePrefix('fault'), timeoutMs)),
    limits: LIMIT,
    failurePolicy: policy,
    instances: INSTANCES,
  });
  limiters.push(limiter);
  return limiter;
}

async function perRequest(
  policy: 'open' | 'closed',
  coalesce = true,
  timeoutMs = TIMEOUT_MS,
): Promise<RequestLimiter> {
  const limiter = createRedisLimiter({
    ...(await onRedis(coalesce, uniquePrefix('fault'), timeoutMs)),
    limits: LIMIT,
    failurePolicy: policy,
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

/** `limiter` after `count` decisions on a healthy Redis: connected, its scripts loaded. */
async function warmedUp<L extends TieredLimiter | RequestLimiter>(limiter: L, count: number): Promise<L> {
  await drive(limiter, count, (i) => `warm-${i}`);
  return limiter;
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

/** Decides `count` times at once (so the store coalesces them), timing each; bounded by count. */
async function burst(limiter: TieredLimiter | RequestLimiter, count: number, key: (i: number) => string) {
  return Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const start = performance.now();
      const decision = await limiter.consume(key(i));
      return { decision, ms: performance.now() - start };
    }),
  );
}

/** Tokens gone from each key's bucket (capacity 40, 20/s: read at once, before much refills). */
async function takenPerKey(prefix: string, keys: readonly string[]): Promise<number[]> {
  const store = new RedisStore({ redis: await connect(), prefix });
  const replies = await Promise.all(keys.map((key) => store.apply({ key, limits: [SLOW] })));
  return replies.map((reply) => SLOW.capacity - reply.remaining);
}

describe.each(CLIENT_KINDS)('with %s', (clientKind) => {
  beforeAll(() => {
    kind = clientKind;
  });

  describe.each(['open', 'closed', 'local'] as const)(
    'TieredLimiter, failurePolicy %s, on a real Redis fault',
    (policy) => {
      it('CLIENT PAUSE: every decision within the timeout, by policy; back on Redis once the pause ends', async () => {
        const limiter = await warmedUp(await tiered(policy), 5);
        const pausedAt = performance.now();
        await admin().call('CLIENT', 'PAUSE', String(PAUSE_MS));
        const during = await drive(limiter, 40, (i) => `paused-${i}`);
        expectByPolicy(during, policy);
        if (policy === 'local') {
          // One key, hammered while paused: no more than the local share (40 / 4 = 10 at once).
          const hammered = await drive(limiter, 30, () => 'paused-hot');
          expect(hammered.filter((t) => t.decision.allowed).length).toBeLessThanOrEqual(10 + 1);
        }
        await msUntilStoreAnswers(limiter, 'after-pause', BACK_AFTER_RESTART_MS);
        const backMs = performance.now() - pausedAt;
        console.info(`${policy}: back on Redis ${Math.round(backMs)} ms after a ${PAUSE_MS} ms pause began`);
        expect(backMs).toBeLessThanOrEqual(BACK_AFTER_PAUSE_MS);
      });

      it('killed, then restarted: decisions by policy while it is gone, from Redis once it is back', async () => {
        const limiter = await warmedUp(await tiered(policy), 5);
        await server.kill();
        const during = await drive(limiter, 40, (i) => `down-${i}`);
        expectByPolicy(during, policy);
        await server.restart();
        const restartedAt = performance.now();
        const ms = await msUntilStoreAnswers(limiter, 'after-restart', BACK_AFTER_RESTART_MS);
        console.info(
          `${policy}: back on Redis ${Math.round(ms)} ms after restart (${Math.round(performance.now() - restartedAt)})`,
        );
        expect(ms).toBeLessThanOrEqual(BACK_AFTER_RESTART_MS);
      });
    },
  );

  describe('SCRIPT FLUSH', () => {
    it('costs no decision: the script is sent again on NOSCRIPT (it did not run)', async () => {
      // A generous timeout: the resent script's second round trip on a loaded machine can take
      // longer than 20 ms, and that would be a timeout's decision, not NOSCRIPT's.
      const tieredLimiter = await tiered('closed', true, 1000);
      const requestLimiter = await perRequest('closed', true, 1000);
      await drive(tieredLimiter, 3, (i) => `a-${i}`);
      await drive(requestLimiter, 3, (i) => `a-${i}`);
      await admin().script('FLUSH');
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
        const limiter = await warmedUp(await perRequest(policy), 3);
        const pausedAt = performance.now();
        await admin().call('CLIENT', 'PAUSE', String(PAUSE_MS));
        expectByPolicy(await drive(limiter, 30, (i) => `paused-${i}`), policy);
        await msUntilStoreAnswers(limiter, 'after-pause', BACK_AFTER_RESTART_MS);
        expect(performance.now() - pausedAt).toBeLessThanOrEqual(BACK_AFTER_PAUSE_MS);
        await server.kill();
        expectByPolicy(await drive(limiter, 30, (i) => `down-${i}`), policy);
        await server.restart();
        expect(
          await msUntilStoreAnswers(limiter, 'after-restart', BACK_AFTER_RESTART_MS),
        ).toBeLessThanOrEqual(BACK_AFTER_RESTART_MS);
      });
    },
  );

  describe.each([true, false])('coalescing %s: a batch in flight when the connection drops', (coalesce) => {
    it('RequestLimiter: each waiting request gets its policy within the timeout; no op runs twice', async () => {
      const prefix = uniquePrefix('batch');
      const limiter = createRedisLimiter({
        ...(await onRedis(coalesce, prefix)),
        limits: SLOW,
        failurePolicy: 'closed',
      });
      limiters.push(limiter);
      const keys = Array.from({ length: 64 }, (_, i) => `k${i}`);
      await burst(limiter, keys.length, (i) => keys[i]!); // one token each, scripts loaded
      const control = admin();
      await control.call('CLIENT', 'PAUSE', '2000', 'WRITE');
      try {
        const pending = burst(limiter, keys.length, (i) => keys[i]!);
        await new Promise((r) => setTimeout(r, 100)); // the batches are on the server, held
        await killConnections(control, prefix);
        expectByPolicy(await pending, 'closed');
      } finally {
        await control.call('CLIENT', 'UNPAUSE');
      }
      await new Promise((r) => setTimeout(r, 500)); // past the reconnect and anything sent late
      const taken = await takenPerKey(prefix, keys);
      // 1 from the warm-up. Every held op was on the server (64 keys: two coalesced calls, or 64
      // single ones) when its connection died, so none ran; a resend would run after the unpause.
      expect(taken).toEqual(keys.map(() => 1));
      console.info(
        `${clientKind}, coalesce ${coalesce}: ${limiter.stats().decisions.fallback} by policy, none resent`,
      );
    });

    it('TieredLimiter: every request by policy within the timeout while Redis is killed mid-batch', async () => {
      const limiter = await tiered('local', coalesce);
      await burst(limiter, 64, (i) => `warm-${i}`);
      await admin().call('CLIENT', 'PAUSE', '1000', 'WRITE');
      const pending = burst(limiter, 64, (i) => `cold-${i}`);
      await new Promise((r) => setTimeout(r, 50));
      await server.kill();
      expectByPolicy(await pending, 'local');
      await server.restart();
      expect(await msUntilStoreAnswers(limiter, 'after-batch', BACK_AFTER_RESTART_MS)).toBeLessThanOrEqual(
        BACK_AFTER_RESTART_MS,
      );
    });
  });
});

/** Kills the limiter's own connections (those that ran EVALSHA/EVAL last), not the admin's. */
async function killConnections(control: ReturnType<typeof admin>, _prefix: string): Promise<void> {
  const list = String(await control.call('CLIENT', 'LIST'));
  for (const line of list.split('\n')) {
    const id = /\bid=(\d+)/.exec(line)?.[1];
    if (id !== undefined && /\bcmd=(evalsha|eval)\b/.test(line))
      await control.call('CLIENT', 'KILL', 'ID', id);
  }
}
