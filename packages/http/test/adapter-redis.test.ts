/**
 * Each adapter on a real Redis (the harness starts its own `redis-server`): the limit shared
 * through Redis by two apps, the headers, and tokens given back with `skipFailedRequests` by the
 * store's own Lua refund.
 */
import { defineLimit } from '@tiered-limiter/core';
import { RequestLimiter } from '@tiered-limiter/local';
import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
import { type RedisServer, startRedis, uniquePrefix, whenReady } from '@tiered-limiter/test-harness';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ADAPTERS, closeApps } from './adapters.js';
import { parseRateLimit, request, requestMany, tokensIn } from './helpers.js';

// Slow enough (1 token per 100 s) that no refill lands during a test.
const quota = defineLimit({ capacity: 4, refillPerSecond: 0.01, name: 'quota' });

let redis: RedisServer;
let store: RedisStore;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  redis = await startRedis();
  const client = redis.client(recommendedRedisOptions);
  await whenReady(client);
  store = new RedisStore({ redis: client, prefix: uniquePrefix('http-adapters') });
});
afterEach(async () => {
  await closeApps();
  await Promise.all(closers.splice(0).map((close) => close()));
});
afterAll(() => redis?.stop());

describe.each(ADAPTERS)('$name on a real Redis', (adapter) => {
  it('shares one limit between two apps through Redis, and gives failed requests back', async () => {
    const key = uniquePrefix(adapter.name.replace(/\W/g, ''));
    // A generous timeout: on a loaded 2-core machine a reply can take longer than the default
    // 20 ms, and the closed policy would answer 503; this test is about the shared limit.
    const options = { store, limits: quota, failurePolicy: 'closed', timeoutMs: 1000 } as const;
    const one = new RequestLimiter(options);
    const two = new RequestLimiter(options);
    closers.push(
      () => one.close(),
      () => two.close(),
    );
    const a = await adapter.start({ limiter: one, key: () => key, skipFailedRequests: true });
    const b = await adapter.start({ limiter: two, key: () => key });

    // Two failures on A are given back in Redis: the four tokens are still there for successes.
    expect((await requestMany(`${a.url}/status/500`, 2)).map((r) => r.status)).toEqual([500, 500]);
    // The refund follows the response's close: wait for it (bounded) before the next decision.
    await vi.waitFor(async () => expect(await tokensIn(store, key, [quota])).toBe(4), {
      timeout: 5000,
    });

    const first = await request(`${a.url}/items`);
    expect(parseRateLimit(first.headers.ratelimit)).toEqual([{ name: 'quota', r: 3, t: 100 }]);
    const replies = [
      ...(await requestMany(`${b.url}/items`, 2)),
      ...(await requestMany(`${a.url}/items`, 2)),
    ];
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(replies[3]!.headers['retry-after']).toBe(
      parseRateLimit(replies[3]!.headers.ratelimit)[0]!.t?.toString(),
    );
  });
});
