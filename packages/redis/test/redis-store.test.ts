/**
 * RedisStore on a real Redis server: construction, failures, the clock, key expiry, script
 * reloading, what a dropped connection does, and what one key costs in memory.
 */
import { ConfigError, defineLimit, perSecond, StoreError } from '@tiered-limiter/core';
import {
  bucketKey,
  bucketKeys,
  DEFAULT_KEEP_AFTER_FULL_MS,
  KEY_TTL_MARGIN_MS,
  MAX_KEEP_AFTER_FULL_MS,
  RedisStore,
  recommendedClusterOptions,
  recommendedNodeRedisClusterOptions,
  recommendedNodeRedisOptions,
  recommendedNodeRedisSentinelOptions,
  recommendedRedisOptions,
  recommendedRetryStrategy,
  recommendedSentinelOptions,
  reconnectOnReadonly,
} from '@tiered-limiter/redis';
import {
  destroySocket,
  freePort,
  storeOps as ops,
  type RedisServer,
  sleepAtLeast,
  startRedis,
  stopwatch,
  takeWhileCutting,
  uniquePrefix,
  whenReady,
} from '@tiered-limiter/test-harness';
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { expectNeverResent, expectResentAndCountedTwice } from './cut-take.js';
import { readBucket } from './stored-bucket.js';

let server: RedisServer;
let redis: Redis;

beforeAll(async () => {
  server = await startRedis();
  redis = server.client(recommendedRedisOptions);
  await whenReady(redis);
});

afterAll(() => server.stop());

afterEach(() => {
  vi.useRealTimers();
});

const slow = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'slow' });

/** `cmdstat_<command>:calls` from INFO commandstats (0 if never called). */
async function calls(client: Redis, command: string): Promise<number> {
  const info = await client.info('commandstats');
  const match = new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info);
  return match ? Number(match[1]) : 0;
}

describe('construction', () => {
  it('refuses a bad prefix or something that is not an ioredis client, naming the option', () => {
    for (const prefix of ['', 'a{b}', 'x'.repeat(65), 42]) {
      expect(() => new RedisStore({ redis, prefix: prefix as string })).toThrow(ConfigError);
    }
    expect(() => new RedisStore({ redis, prefix: 'a{b}' })).toThrow(/`prefix`/);
    for (const client of [undefined, null, {}, 'redis://localhost']) {
      expect(() => new RedisStore({ redis: client as unknown as Redis })).toThrow(
        /Expected `redis` to be an ioredis/,
      );
    }
    expect(() => new RedisStore(undefined as never)).toThrow(ConfigError);
  });

  it('refuses a keepAfterFullMs that is not a whole number of ms from 0 to a day, naming it', () => {
    for (const keepAfterFullMs of [-1, 0.5, MAX_KEEP_AFTER_FULL_MS + 1, Number.NaN, '1000']) {
      expect(() => new RedisStore({ redis, keepAfterFullMs: keepAfterFullMs as number })).toThrow(
        /`keepAfterFullMs`/,
      );
    }
    for (const keepAfterFullMs of [0, MAX_KEEP_AFTER_FULL_MS]) new RedisStore({ redis, keepAfterFullMs });
  });

  it('uses the prefix `tl` by default: `tl:{tag}:limitName`', async () => {
    const store = new RedisStore({ redis });
    expect(store.prefix).toBe('tl');
    const user = `${uniquePrefix('default')}:user`;
    await ops(store).take(user, [slow], 1);
    expect(await redis.exists(`tl:{${user.replaceAll(':', '%3A')}}:slow`)).toBe(1);
    await redis.del(bucketKey('tl', user, 'slow'));
  });

  it('puts every key of one server in one call group', () => {
    const store = new RedisStore({ redis, prefix: uniquePrefix('group') });
    expect(['a', 'user:42', '', 'x'.repeat(300)].map((key) => store.groupOf(key))).toEqual([0, 0, 0, 0]);
  });
});

describe('failures', () => {
  it('rejects with a StoreError carrying the ioredis error when Redis cannot be reached', async () => {
    const port = await freePort();
    const away = new Redis({ ...recommendedRedisOptions, port, host: '127.0.0.1', lazyConnect: true });
    away.on('error', () => {});
    const store = new RedisStore({ redis: away });
    const error = await ops(store)
      .take('k', [slow], 1)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({
      code: 'ERR_TL_STORE',
      message: expect.stringMatching(/redis apply failed/),
    });
    expect((error as StoreError).cause).toBeInstanceOf(Error);
    away.disconnect();
  });

  it('rejects every op of a failed call with the one StoreError of that call', async () => {
    const port = await freePort();
    const away = new Redis({ ...recommendedRedisOptions, port, host: '127.0.0.1', lazyConnect: true });
    away.on('error', () => {});
    const store = new RedisStore({ redis: away });
    const errors = await Promise.all(
      ['a', 'b', 'c'].map((key) =>
        ops(store)
          .take(key, [slow], 1)
          .catch((e: unknown) => e),
      ),
    );
    expect(store.stats().calls).toBe(1);
    expect(errors[0]).toBeInstanceOf(StoreError);
    expect(errors[1]).toBe(errors[0]);
    expect(errors[2]).toBe(errors[0]);
    away.disconnect();
  });

  it('rejects with a StoreError when a key holds something that is not a bucket', async () => {
    const store = new RedisStore({ redis, prefix: uniquePrefix('wrongtype') });
    await redis.hset(bucketKey(store.prefix, 'k', 'slow'), 'not', 'a bucket');
    await expect(ops(store).take('k', [slow], 1)).rejects.toThrow(/redis apply failed: WRONGTYPE/);
    await expect(ops(store).peek('k', [slow])).rejects.toBeInstanceOf(StoreError);
  });

  it('parses replies from a client with `stringNumbers`', async () => {
    const strings = server.client({ stringNumbers: true });
    const store = new RedisStore({ redis: strings, prefix: uniquePrefix('strings') });
    expect(await ops(store).take('k', [slow], 3)).toMatchObject({ ok: true, remaining: 7, limitIndex: 0 });
    expect(await ops(store).reserve('k', [slow], 2, 1)).toMatchObject({ granted: 2, remaining: 5 });
  });
});

describe('the clock', () => {
  it('is Redis’s TIME: a client whose clock is hours off gets the same replies', async () => {
    const store = new RedisStore({ redis, prefix: uniquePrefix('clock') });
    // A token a second: no refill lands between the two takes, however slow the machine.
    const limit = defineLimit({ capacity: 10, refillPerSecond: 1 });
    const key = bucketKey(store.prefix, 'k', limit.name);
    const real = Date.now();
    const clock = stopwatch();
    vi.useFakeTimers({ toFake: ['Date'] });

    vi.setSystemTime(real + 5 * 3_600_000);
    expect(await ops(store).take('k', [limit], 1)).toEqual({
      ok: true,
      granted: 1,
      generation: 0,
      remaining: 9,
      retryAfterMs: 0,
      resetMs: 1000,
      limitIndex: 0,
    });
    const [seconds, micros] = await redis.time();
    const serverMs = Number(seconds) * 1000 + Number(micros) / 1000;
    const storedMs = Number((await readBucket(redis, key))?.updatedAtUs) / 1000;
    expect(Math.abs(storedMs - serverMs)).toBeLessThan(5_000);
    expect(Math.abs(storedMs - Date.now())).toBeGreaterThan(4 * 3_600_000);

    vi.setSystemTime(real - 3 * 3_600_000);
    const second = await ops(store).take('k', [limit], 1);
    expect(second).toMatchObject({ ok: true, remaining: 8, retryAfterMs: 0 });
    // 2 tokens short of full: 2,000 ms, less what passed since the first take.
    expect(second.resetMs).toBeLessThanOrEqual(2000);
    expect(second.resetMs).toBeGreaterThanOrEqual(2000 - clock());
  });
});

describe('key expiry', () => {
  // 10 tokens, 50 per second: an empty bucket is full again in 200 ms.
  const fast = defineLimit({ capacity: 10, refillPerSecond: 50, name: 'fast' });

  it('keeps a reset key, full, until the last lease it fenced is due, then lets it go', async () => {
    const store = new RedisStore({ redis, prefix: uniquePrefix('fence'), keepAfterFullMs: 0 });
    const key = bucketKey(store.prefix, 'k', fast.name);
    await store.apply({ key: 'k', limits: [fast], reserve: { want: 5, min: 5, holdMs: 600 } });
    await store.reset('k', [fast]);
    // Full, yet kept: the fence outlives the lease's release (600 ms, rounded up to a step).
    expect(await ops(store).peek('k', [fast])).toMatchObject({ remaining: 10, resetMs: 0 });
    expect(await redis.pttl(key)).toBeGreaterThan(400);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await redis.exists(key)).toBe(0);
  });

  it('keeps the key while the bucket drains, with PTTL = time until full + margin + keepAfterFullMs', async () => {
    for (const keepAfterFullMs of [undefined, 0, 300]) {
      const keep = keepAfterFullMs ?? DEFAULT_KEEP_AFTER_FULL_MS;
      const store = new RedisStore({ redis, prefix: uniquePrefix('ttl'), keepAfterFullMs });
      const key = bucketKey(store.prefix, 'k', fast.name);
      for (const cost of [5, 3, 2]) {
        const clock = stopwatch();
        const reply = await ops(store).take('k', [fast], cost);
        const ttl = await redis.pttl(key);
        const elapsed = clock();
        expect(reply.ok).toBe(true);
        expect(ttl).toBeLessThanOrEqual(reply.resetMs + KEY_TTL_MARGIN_MS + keep);
        // Never shorter than the time until full, less what passed between the take and PTTL.
        expect(ttl).toBeGreaterThanOrEqual(reply.resetMs + KEY_TTL_MARGIN_MS + keep - elapsed - 1);
        expect(await redis.exists(key)).toBe(1);
      }
    }
  });

  it('keeps a full bucket’s key keepAfterFullMs, reading as full, then lets it expire', async () => {
    const store = new RedisStore({ redis, prefix: uniquePrefix('ttl'), keepAfterFullMs: 1000 });
    const key = bucketKey(store.prefix, 'k', fast.name);
    const clock = stopwatch();
    expect(await ops(store).take('k', [fast], 10)).toMatchObject({ remaining: 0, resetMs: 200 });
    await sleepAtLeast(400);
    // Full for 200 ms or more: the key is still there, and what it holds reads as a full bucket.
    expect(await ops(store).peek('k', [fast])).toMatchObject({ remaining: 10, resetMs: 0 });
    if (clock() < 200 + KEY_TTL_MARGIN_MS + 1000) expect(await redis.exists(key)).toBe(1);
    await sleepAtLeast(200 + KEY_TTL_MARGIN_MS + 1000 + 20 - clock());
    expect(await redis.exists(key)).toBe(0);
  });

  it('lets the key expire once the bucket would be full, with keepAfterFullMs 0', async () => {
    const store = new RedisStore({ redis, prefix: uniquePrefix('ttl'), keepAfterFullMs: 0 });
    const key = bucketKey(store.prefix, 'k', fast.name);
    const reply = await ops(store).take('k', [fast], 10);
    expect(reply).toMatchObject({ remaining: 0, resetMs: 200 });
    expect(await redis.exists(key)).toBe(1);
    await sleepAtLeast(reply.resetMs + KEY_TTL_MARGIN_MS + 20);
    expect(await redis.exists(key)).toBe(0);
    expect(await ops(store).peek('k', [fast])).toMatchObject({ remaining: 10, resetMs: 0 });
  });

  it('deletes the key at once when a credit fills the bucket, and sets each limit’s own TTL', async () => {
    const store = new RedisStore({ redis, prefix: uniquePrefix('ttl') });
    const [fastKey, slowKey] = bucketKeys(store.prefix, 'k', [fast, slow]);
    await ops(store).take('k', [fast, slow], 2);
    expect(await redis.pttl(fastKey!)).toBeLessThanOrEqual(
      40 + KEY_TTL_MARGIN_MS + DEFAULT_KEEP_AFTER_FULL_MS,
    );
    expect(await redis.pttl(slowKey!)).toBeGreaterThan(2_000_000 - 1000);
    await sleepAtLeast(30); // `fast` refills 1.5 tokens or more: 9.5 of 10; `slow` still 8
    await ops(store).credit('k', [fast, slow], 1);
    expect(await redis.exists(fastKey!)).toBe(0);
    expect(await redis.exists(slowKey!)).toBe(1);
    await ops(store).credit('k', [fast, slow], 1);
    expect(await redis.exists(slowKey!)).toBe(0);
  });
});

describe('script loading', () => {
  it('goes out as EVALSHA, and recovers by itself after SCRIPT FLUSH (NOSCRIPT)', async () => {
    const client = server.client(recommendedRedisOptions);
    await whenReady(client);
    const store = new RedisStore({ redis: client, prefix: uniquePrefix('flush') });
    const evalshaBefore = await calls(redis, 'evalsha');
    for (let i = 0; i < 20; i++) await ops(store).take(`k${i}`, [slow], 1);
    // ioredis sends the first call on a connection as EVAL, then EVALSHA.
    expect((await calls(redis, 'evalsha')) - evalshaBefore).toBeGreaterThanOrEqual(19);

    await redis.script('FLUSH');
    expect(await redis.script('EXISTS', '0'.repeat(40))).toEqual([0]);
    const evalBefore = await calls(redis, 'eval');
    expect(await ops(store).take('k0', [slow], 1)).toMatchObject({ ok: true, remaining: 8 });
    expect((await calls(redis, 'eval')) - evalBefore).toBeGreaterThanOrEqual(1);

    const evalshaAfterFlush = await calls(redis, 'evalsha');
    for (let i = 0; i < 5; i++) await ops(store).take('k1', [slow], 1);
    expect((await calls(redis, 'evalsha')) - evalshaAfterFlush).toBeGreaterThanOrEqual(5);
    expect((await ops(store).peek('k1', [slow])).remaining).toBe(4);
  });
});

describe('a connection that drops with a take in flight', () => {
  /** Sends a take, cuts the socket under it at once, and reports the reply (or error) and tokens taken. */
  async function cutDuringTake(options: RedisOptions) {
    const client = server.client({ ...options, retryStrategy: () => 20 });
    await whenReady(client);
    const store = new RedisStore({ redis: client, prefix: uniquePrefix('cut') });
    await ops(store).peek('k', [slow]); // loads the script on this connection
    const outcome = await takeWhileCutting(store, 'k', [slow], () => destroySocket(client));
    await whenReady(client);
    const taken = 10 - (await ops(store).peek('k', [slow])).remaining;
    return { ...outcome, taken };
  }

  it('is never sent twice with the recommended options (it fails and the limiter decides)', () =>
    expectNeverResent(() => cutDuringTake(recommendedRedisOptions)));

  it('is sent twice, and counted twice, with ioredis’ defaults (why the options matter)', () =>
    expectResentAndCountedTwice(() => cutDuringTake({})));
});

describe('stats()', () => {
  it('counts round trips, ops and keys as Redis saw them (INFO commandstats)', async () => {
    const client = server.client(recommendedRedisOptions);
    await whenReady(client);
    const store = new RedisStore({ redis: client, prefix: uniquePrefix('stats') });
    const two = [slow, defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'five' })];
    await ops(store).peek('warm', [slow]); // the first call on a connection is an EVAL
    const before = { stats: store.stats(), evalsha: await calls(redis, 'evalsha') };
    // 100 ops made in one tick: 32 keys a call at most, 4 calls in flight, the rest wait.
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) => ops(store).take(`user-${i}`, two, 1)),
    );
    expect(replies.every((r) => r.ok)).toBe(true);
    const after = { stats: store.stats(), evalsha: await calls(redis, 'evalsha') };
    const calls_ = after.stats.calls - before.stats.calls;
    expect(after.stats.ops - before.stats.ops).toBe(50);
    expect(after.stats.keys - before.stats.keys).toBe(100);
    expect(calls_).toBe(after.evalsha - before.evalsha);
    expect(calls_).toBe(Math.ceil(100 / 32));
    // Not coalescing: one call per op.
    const single = new RedisStore({ redis: client, prefix: uniquePrefix('stats'), coalesce: false });
    await Promise.all(Array.from({ length: 10 }, (_, i) => ops(single).take(`u${i}`, [slow], 1)));
    expect(single.stats()).toEqual({ calls: 10, ops: 10, keys: 10, withdrawn: 0 });
  });
});

describe('ops that requests wait on', () => {
  /** Ops made in one tick on a store of calls of 8 keys, one in flight: the order they are answered in. */
  async function answerOrder(made: readonly ('waited' | 'background')[]) {
    const store = new RedisStore({
      redis,
      prefix: uniquePrefix('lanes'),
      coalesce: { maxKeysPerCall: 8, maxInFlight: 1 },
    });
    const answered: string[] = [];
    await Promise.all(
      made.map((kind, i) =>
        store
          .apply({ key: `k${i}`, limits: [slow], take: 1, background: kind === 'background' })
          .then(() => answered.push(kind)),
      ),
    );
    return answered;
  }

  it('leave ahead of background ops queued before them (a sync round)', async () => {
    const made = [...Array<'background'>(40).fill('background'), 'waited' as const];
    const answered = await answerOrder(made);
    // The first call: the waited op, then 7 background ones. In arrival order it was the sixth.
    expect(answered.indexOf('waited')).toBe(0);
  });

  it('leave a quarter of each call to background ops, which a stream of requests never starves', async () => {
    const made = [...Array<'waited'>(40).fill('waited'), ...Array<'background'>(8).fill('background')];
    const answered = await answerOrder(made);
    expect(answered.slice(0, 8).filter((kind) => kind === 'background')).toHaveLength(2);
  });
});

describe('virtual shards', () => {
  it('keys become prefix:{s<n>}:tag:limit, the state lives there, and the option is checked', async () => {
    const client = server.client(recommendedRedisOptions);
    await whenReady(client);
    const prefix = uniquePrefix('shards');
    const store = new RedisStore({ redis: client, prefix, shards: 16 });
    expect(store.shards).toBe(16);
    await ops(store).take('user:42', [slow], 3);
    const [key] = bucketKeys(prefix, 'user:42', [slow], 16);
    expect(key).toMatch(new RegExp(`^${prefix}:\\{s\\d{1,2}\\}:user%3A42:slow$`));
    expect((await readBucket(redis, key!))?.tokens).toBe(7);
    // The same user without shards is another key: turning shards on renames every bucket.
    expect((await ops(new RedisStore({ redis: client, prefix })).peek('user:42', [slow])).remaining).toBe(10);
    for (const shards of [0, 16_385, 1.5, '4']) {
      expect(() => new RedisStore({ redis: client, prefix, shards: shards as number })).toThrow(/`shards`/);
    }
  });
});

describe('recommended options', () => {
  it('never queue, never resend, fail fast, and reconnect with a bounded back-off', () => {
    expect(recommendedRedisOptions).toMatchObject({
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      enableAutoPipelining: false,
      connectTimeout: 1000,
      reconnectOnError: reconnectOnReadonly,
    });
    expect([1, 2, 3, 4, 5, 6, 7, 100, 10_000].map(recommendedRetryStrategy)).toEqual([
      50, 100, 200, 400, 800, 1000, 1000, 1000, 1000,
    ]);
    expect(Object.isFrozen(recommendedRedisOptions)).toBe(true);
  });

  it('the Cluster, Sentinel and node-redis options are the ones the README lists', () => {
    expect(recommendedClusterOptions).toMatchObject({
      enableOfflineQueue: false,
      retryDelayOnFailover: 0,
      enableAutoPipelining: false,
      redisOptions: recommendedRedisOptions,
    });
    expect(recommendedSentinelOptions).toMatchObject({
      ...recommendedRedisOptions,
      reconnectOnError: reconnectOnReadonly,
      failoverDetector: true,
      sentinelRetryStrategy: recommendedRetryStrategy,
      sentinelCommandTimeout: 1000,
    });
    expect(reconnectOnReadonly(new Error("READONLY You can't write against a read only replica."))).toBe(
      true,
    );
    expect(reconnectOnReadonly(new Error('LOADING Redis is loading the dataset in memory'))).toBe(false);
    expect(recommendedNodeRedisOptions).toMatchObject({
      disableOfflineQueue: true,
      socket: { connectTimeout: 1000 },
    });
    expect([0, 1, 2, 3, 4, 5, 99].map(recommendedNodeRedisOptions.socket.reconnectStrategy)).toEqual([
      50, 100, 200, 400, 800, 1000, 1000,
    ]);
    expect(recommendedNodeRedisClusterOptions.defaults).toBe(recommendedNodeRedisOptions);
    expect(recommendedNodeRedisSentinelOptions).toEqual({
      nodeClientOptions: recommendedNodeRedisOptions,
      maxCommandRediscovers: 0,
    });
    for (const options of [
      recommendedClusterOptions,
      recommendedSentinelOptions,
      recommendedNodeRedisOptions,
      recommendedNodeRedisSentinelOptions,
    ]) {
      expect(Object.isFrozen(options)).toBe(true);
    }
  });
});

describe('memory', () => {
  it('reports what one bucket key takes in Redis (MEMORY USAGE)', async () => {
    const store = new RedisStore({ redis, prefix: 'tl' });
    const user = `memory-${uniquePrefix('m')}`;
    const limits = [
      perSecond(10),
      defineLimit({ capacity: 1000, refillPerSecond: 1000 / 3600, name: '1000ph' }),
    ];
    await ops(store).take(user, limits, 1);
    const keys = bucketKeys('tl', user, limits);
    const bytes = await Promise.all(keys.map((key) => redis.memory('USAGE', key, 'SAMPLES', '0')));
    const encoding = await redis.object('ENCODING', keys[0]!);
    console.log(
      `MEMORY USAGE of one bucket key (${keys[0]!.length}-byte name, ${encoding}): ${bytes[0]} bytes; ` +
        `a user with two limits: ${bytes.reduce((a, b) => Number(a) + Number(b), 0)} bytes`,
    );
    for (const b of bytes) {
      expect(Number(b)).toBeGreaterThan(0);
      expect(Number(b)).toBeLessThan(256);
    }
    await redis.del(...keys);
  });
});
