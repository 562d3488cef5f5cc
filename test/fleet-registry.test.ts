/**
 * The README (The periodic sync): "The registry is the store's prefix's, and each limiter is an
 * instance in it (`instanceId`, a random UUID by default): two `TieredLimiter`s in one process on
 * stores with one prefix count as two instances … Give each limiter a prefix of its own where each
 * should have the whole budget", and "`close()` takes the instance out of the registry". The fake-time
 * tests hold the count on a MemoryStore by `instanceId`; this holds it where the README means it: two
 * `RedisStore`s on one server, by prefix, with the default ids.
 */
import { defineLimit } from '@tiered-limiter/core';
import { TieredLimiter } from '@tiered-limiter/local';
import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
import { uniquePrefix, waitUntil, whenReady } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { redisForFile } from './src/redis-for-file.js';

const redis = redisForFile();
const LIMIT = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'api' });

// An idle limiter beats every 250 ms at most: a few beats' time, with room for a loaded machine.
const BEATS_MS = 3_000;

describe('the fleet registry on Redis', () => {
  it('counts two limiters on stores with one prefix as two instances, one on its own prefix as one, and forgets one at close()', async () => {
    const client = redis.client(recommendedRedisOptions);
    await whenReady(client);
    const shared = uniquePrefix('registry-shared');
    const limiter = (prefix: string) =>
      new TieredLimiter({
        store: new RedisStore({ redis: client, prefix }),
        limits: LIMIT,
        failurePolicy: 'open',
        instances: 1,
      });
    const [a, b, alone] = [limiter(shared), limiter(shared), limiter(uniquePrefix('registry-alone'))];

    await waitUntil(
      'both limiters on the shared prefix to read two live instances',
      async () => a.stats().liveInstances === 2 && b.stats().liveInstances === 2,
      BEATS_MS,
    );
    // Above the declared 1, the fleet in force is the count; the limiter alone keeps its whole budget.
    expect(a.stats().instances).toBe(2);
    expect(alone.stats()).toMatchObject({ liveInstances: 1, instances: 1 });

    await b.close();
    await waitUntil('the one left to read itself alone', async () => a.stats().liveInstances === 1, BEATS_MS);
    expect(a.stats().instances).toBe(1);
    await Promise.all([a.close(), alone.close()]);
  });

  it('registers each instance under <prefix>:{%fleet} as a random UUID of its own (or its instanceId), and close() takes it out', async () => {
    const client = redis.client(recommendedRedisOptions);
    await whenReady(client);
    const prefix = uniquePrefix('registry-ids');
    const limiter = (instanceId?: string) =>
      new TieredLimiter({
        store: new RedisStore({ redis: client, prefix }),
        limits: LIMIT,
        failurePolicy: 'open',
        instances: 1,
        ...(instanceId === undefined ? {} : { instanceId }),
      });
    const [a, b, named] = [limiter(), limiter(), limiter('api-7')];
    const key = `${prefix}:{%fleet}`;
    const members = async () => (await client.zrange(key, 0, -1)).sort();
    await waitUntil('three registrations', async () => (await members()).length === 3, BEATS_MS);
    const ids = (await members()).filter((id) => id !== 'api-7');
    expect(ids).toHaveLength(2);
    for (const id of ids)
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // A registry that no instance beats again lapses as a key too.
    expect(await client.pttl(key)).toBeGreaterThan(0);

    await named.close();
    expect(await members()).toEqual(ids.sort());
    await Promise.all([a.close(), b.close()]);
    expect(await client.exists(key)).toBe(0);
  });
});
