// What the README's "What a key becomes" and its options table promise about the keys the two
// factories leave in Redis, read back from the server itself: the default prefix, a prefix shared by
// two limiters (one bucket) or not (two), `keepAfterFullMs` and `shards` given to a factory rather
// than to a `RedisStore`, and what `peek` and `reset` leave behind. The RedisStore-level checks are
// in packages/redis/test/redis-store.test.ts; these hold the factories to the same promises.
import { defineLimit, type LimitSpec } from '@tiered-limiter/core';
import type { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { createRedisLimiter, createTieredLimiter } from '@tiered-limiter/redis';
import { uniquePrefix } from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisFileKit } from './src/redis-file-kit.js';

const kit = redisFileKit();

// One token back per 1,000 s: nothing refills while a test reads what is left.
const FIVE = defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'five' });
// One token in 100 ms: a key's TTL after one take is 100 ms plus what the options add.
const TEN = defineLimit({ capacity: 10, refillPerSecond: 10, name: 'ten' });

type Kind = 'createRedisLimiter' | 'createTieredLimiter';
const KINDS: readonly Kind[] = ['createRedisLimiter', 'createTieredLimiter'];

/** A factory's limiter on the file's server; `sync: false` keeps a two-tier key's first hit a plain take. */
async function make(
  kind: Kind,
  options: { limits: LimitSpec | LimitSpec[]; prefix?: string; keepAfterFullMs?: number; shards?: number },
) {
  const redis = await kit.redis();
  const common = { redis, failurePolicy: 'closed' as const, timeoutMs: 1_000, ...options };
  const limiter =
    kind === 'createRedisLimiter'
      ? createRedisLimiter(common)
      : createTieredLimiter({ ...common, instances: 1, sync: false });
  kit.track(limiter);
  return { redis, limiter };
}

/** How many of `n` requests for `k`, one after another, `limiter` admits. */
async function admitted(limiter: RequestLimiter | TieredLimiter, n: number): Promise<number> {
  let count = 0;
  for (let i = 0; i < n; i++) if ((await limiter.consume('k')).allowed) count++;
  return count;
}

/** The keys under `prefix` whose user key is `tag` (as escaped), sorted. */
async function keysOf(redis: Redis, prefix: string, tag: string): Promise<string[]> {
  return (await redis.keys(`${prefix}:*${tag}*`)).sort();
}

describe.each(KINDS)('%s: the keys it leaves in Redis', (kind) => {
  it("uses the prefix 'tl' when given none: tl:{tag}:limitName", async () => {
    // A user key no other test or run uses, since the prefix is shared by every default limiter.
    const user = uniquePrefix('default-prefix');
    const { redis, limiter } = await make(kind, { limits: FIVE });
    expect((await limiter.consume(user)).allowed).toBe(true);
    expect(await redis.keys(`*${user}*`)).toEqual([`tl:{${user}}:five`]);
    await limiter.reset(user);
  });

  it('two limiters with one prefix and one limit name share a bucket; another prefix or name has its own', async () => {
    const prefix = uniquePrefix('shared');
    const a = await make(kind, { prefix, limits: FIVE });
    const b = await make(kind, { prefix, limits: FIVE });
    const ownPrefix = await make(kind, { prefix: uniquePrefix('own'), limits: FIVE });
    const ownName = await make(kind, {
      prefix,
      limits: defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'other' }),
    });
    // a first, then b: one bucket of 5 between them (a two-tier a may hold some of it on lease).
    expect((await admitted(a.limiter, 6)) + (await admitted(b.limiter, 6))).toBe(5);
    expect(await keysOf(a.redis, prefix, '{k}')).toEqual([`${prefix}:{k}:five`]);
    // Apart: a full bucket each.
    expect(await admitted(ownPrefix.limiter, 6)).toBe(5);
    expect(await admitted(ownName.limiter, 6)).toBe(5);
    expect(await keysOf(a.redis, prefix, '{k}')).toEqual([`${prefix}:{k}:five`, `${prefix}:{k}:other`]);
  });

  it('keepAfterFullMs given to the factory: the key lives its time to fill, plus keepAfterFullMs, plus 50 ms', async () => {
    const prefix = uniquePrefix('keep');
    const { redis, limiter } = await make(kind, { prefix, limits: TEN, keepAfterFullMs: 5_000 });
    expect((await limiter.consume('k')).allowed).toBe(true);
    // One token short of full at 10/s: 100 ms to fill, + 5,000 + 50. Read a few ms after the take.
    const pttl = await redis.pttl(`${prefix}:{k}:ten`);
    expect(pttl).toBeLessThanOrEqual(100 + 5_000 + 50);
    // The default (1,000 ms) gives at most 1,150: a read up to a second late still tells them apart.
    expect(pttl).toBeGreaterThan(4_000);
  });

  it('shards given to the factory: keys become prefix:{s<n>}:tag:limitName, n below the shard count', async () => {
    const prefix = uniquePrefix('shards');
    const { redis, limiter } = await make(kind, { prefix, limits: FIVE, shards: 6 });
    expect((await limiter.consume('user:42')).allowed).toBe(true);
    const keys = await keysOf(redis, prefix, 'user%3A42');
    expect(keys).toHaveLength(1);
    const shard = /^.+:\{s(\d+)\}:user%3A42:five$/.exec(keys[0]!);
    expect(shard, keys[0]).not.toBeNull();
    expect(Number(shard![1])).toBeLessThan(6);
  });

  it("peek writes nothing: a key only peeked at is no key in Redis, and a bucket's value is left as it was", async () => {
    const prefix = uniquePrefix('peek');
    const { redis, limiter } = await make(kind, { prefix, limits: [FIVE, TEN] });
    expect(await limiter.peek('fresh')).toMatchObject({ allowed: true, remaining: 5 });
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
    // A drained bucket: a write would stamp it anew (its refill settled to Redis's TIME).
    await limiter.consume('k');
    const key = `${prefix}:{k}:five`;
    const before = await redis.getBuffer(key);
    expect(before).not.toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await limiter.peek('k')).allowed).toBe(true);
    expect(await redis.getBuffer(key)).toEqual(before);
  });

  it("reset forgets the key's buckets in Redis: every limit's key is gone, other keys stay", async () => {
    const prefix = uniquePrefix('reset');
    const { redis, limiter } = await make(kind, { prefix, limits: [FIVE, TEN] });
    await limiter.consume('k');
    await limiter.consume('other');
    expect(await keysOf(redis, prefix, '{k}')).toEqual([`${prefix}:{k}:five`, `${prefix}:{k}:ten`]);
    expect(await limiter.reset('k')).toBe(true);
    expect(await keysOf(redis, prefix, '{k}')).toEqual([]);
    expect(await keysOf(redis, prefix, '{other}')).toHaveLength(2);
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 4 });
  });
});
