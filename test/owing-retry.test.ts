// Hand-backs kept while Redis was away (keys evicted during the outage, README "Graceful
// shutdown") are sent again once it answers. Sent as a guarded call per key, 10,000 of them timed
// out together behind one another on a healthy Redis: a `failure` event each, and the breaker
// opened again right after it had closed, so requests got the policy from a store that answered.
// `setLimits` on a limiter holding 10,000 keys did the same on a Redis that never failed.
import { defineLimit } from '@tiered-limiter/core';
import { createTieredLimiter } from '@tiered-limiter/redis';
import { connectServer, type KindClient, uniquePrefix } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';
import { redisForFile } from './src/redis-for-file.js';

const server = redisForFile();
const clients: KindClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

const KEYS = 10_000;
const LIMIT = defineLimit({ capacity: 100, refillPerSecond: 1, name: 'owing' });
const PAUSE_MS = 1500;

describe('hand-backs kept through an outage, sent once Redis answers', () => {
  it('cost a failure event each, and reopened the breaker on a healthy Redis: now one attempt for them all', async () => {
    const client = await connectServer('ioredis', server);
    clients.push(client);
    const limiter = createTieredLimiter({
      redis: client.client,
      prefix: uniquePrefix('owing'),
      limits: LIMIT,
      failurePolicy: 'open',
      instances: 4,
      maxKeys: KEYS,
      // Every key leases at its first hit, so that each holds tokens when it is evicted.
      lease: { minBatch: 2 },
    });
    /** Requests in flight at once: bounded, as a server's are. */
    const hit = async (prefix: string) => {
      for (let i = 0; i < KEYS; i += 256) {
        const batch = Array.from({ length: Math.min(256, KEYS - i) }, (_, j) => `${prefix}${i + j}`);
        await Promise.all(batch.map((key) => limiter.consume(key)));
      }
    };
    await hit('old-');
    await server.client().call('CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL');
    // While Redis is away: each old key spends from its lease (it owes a report), then new keys
    // (seen twice, so that each makes a lease) push the old ones out of the table.
    await hit('old-');
    // The breaker open before any old key leaves the table: each one's settle is then refused and
    // kept, rather than timed out (sent) while the breaker was still closed. Bounded in time.
    for (const until = performance.now() + PAUSE_MS / 2; !limiter.degraded && performance.now() < until; ) {
      await limiter.consume('opens-the-breaker');
    }
    expect(limiter.degraded).toBe(true);
    await hit('new-');
    await hit('new-');
    let recovered = false;
    let failuresAfter = 0;
    let reopened = 0;
    limiter.on('recovered', () => {
      recovered = true;
    });
    limiter.on('failure', () => {
      if (recovered) failuresAfter++;
    });
    limiter.on('degraded', () => {
      if (recovered) reopened++;
    });
    // A trickle of requests through the recovery and the ticks after it; bounded in time.
    const until = performance.now() + PAUSE_MS + 2500;
    for (let i = 0; performance.now() < until; i++) {
      await limiter.consume(`after-${i % 100}`);
      await new Promise((r) => setTimeout(r, 2));
    }
    expect(recovered).toBe(true);
    console.info(`after the recovery: ${failuresAfter} failure events, breaker reopened ${reopened} times`);
    // One attempt for every kept key: a loaded machine may time it (and a sync slice) out.
    expect(failuresAfter).toBeLessThan(50);
    await limiter.close();
  });

  it('setLimits on 10,000 held keys: their hand-backs go in shared attempts, under 50 failure events on a healthy Redis', async () => {
    const client = await connectServer('ioredis', server);
    clients.push(client);
    const limiter = createTieredLimiter({
      redis: client.client,
      prefix: uniquePrefix('relimit'),
      limits: LIMIT,
      failurePolicy: 'open',
      instances: 4,
      maxKeys: KEYS,
      lease: { minBatch: 2 },
    });
    for (let i = 0; i < KEYS; i += 256) {
      const batch = Array.from({ length: Math.min(256, KEYS - i) }, (_, j) => `k${i + j}`);
      await Promise.all(batch.map((key) => limiter.consume(key)));
    }
    let failures = 0;
    let opened = 0;
    let byPolicy = 0;
    limiter.on('failure', () => failures++);
    limiter.on('degraded', () => opened++);
    limiter.setLimits(defineLimit({ capacity: 100, refillPerSecond: 1, name: 'owing' }));
    const until = performance.now() + 1500;
    for (let i = 0; performance.now() < until; i++) {
      if ((await limiter.consume(`k${i % 50}`)).tier === 'fallback') byPolicy++;
      await new Promise((r) => setTimeout(r, 2));
    }
    console.info(`after setLimits: ${failures} failure events, opened ${opened}, ${byPolicy} by policy`);
    expect(failures).toBeLessThan(50);
    await limiter.close();
  });
});
