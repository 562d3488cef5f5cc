// A store op whose request the guard gave up on (the timeout) is still sent when the coalescer's
// turn comes: Redis runs it after the failure policy has decided the request. Under `local`, the
// request is then counted twice: by the local fallback bucket and by the global one (under
// `closed`, a denied request is charged a token; `reward`/`penalty` resolve `false` and are
// applied). An op already on the wire cannot be called back, but these never left the process:
// they waited in the coalescer behind a call a paused Redis held. Known, not fixed here (it needs
// a way for the guard to withdraw an op the store has not sent): `it.fails` until it is.
import { defineLimit } from '@tiered-limiter/core';
import { createRedisLimiter, RedisStore } from '@tiered-limiter/redis';
import { connectServer, type KindClient, uniquePrefix } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';
import { redisForFile } from './src/redis-for-file.js';

const server = redisForFile();
const clients: KindClient[] = [];
const limiters: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(limiters.splice(0).map((l) => l.close()));
  for (const c of clients.splice(0)) c.close();
});

/** Refills nothing worth a token during the test: what is missing was taken. */
const SLOW = defineLimit({ capacity: 40, refillPerSecond: 0.001, name: 'slow' });

async function connect(): Promise<object> {
  const client = await connectServer('ioredis', server);
  clients.push(client);
  return client.client;
}

describe('ops the guard gave up on before they left the process', () => {
  it.fails('are not sent once Redis answers: a request decided by the local policy is not charged globally too', async () => {
    const prefix = uniquePrefix('late');
    const limiter = createRedisLimiter({
      redis: await connect(),
      prefix,
      coalesce: { maxInFlight: 1 },
      limits: SLOW,
      failurePolicy: 'local',
      fallback: { instances: 4 },
    });
    limiters.push(limiter);
    await limiter.consume('warm'); // connected, script loaded
    await server.client().call('CLIENT', 'PAUSE', '600', 'ALL');
    const held = limiter.consume('held'); // the one call out, held by the pause
    await new Promise((r) => setImmediate(r));
    const keys = Array.from({ length: 10 }, (_, i) => `queued-${i}`);
    const decided = await Promise.all(keys.map((key) => limiter.consume(key)));
    for (const d of decided) expect(d).toMatchObject({ allowed: true, tier: 'fallback', policy: 'local' });
    await held;
    await new Promise((r) => setTimeout(r, 900)); // past the pause, and anything sent late
    const store = new RedisStore({ redis: await connect(), prefix });
    const taken = await Promise.all(
      keys.map(async (key) => SLOW.capacity - (await store.apply({ key, limits: [SLOW] })).remaining),
    );
    // Each queued request was counted by the local bucket; the global bucket should not count it again.
    expect(taken).toEqual(keys.map(() => 0));
  });
});
