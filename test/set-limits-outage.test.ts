// `setLimits` to a renamed limit while the breaker is open: the old lease's hand-back is refused,
// kept, and sent once the store answers. It must go to the bucket its tokens came from. Sent
// under the new name, it met a lease of the same generation that another holder had taken on the
// new bucket since (a generation is a release time rounded to a step that grows with the hold:
// about 268 s for a lease of an hour), handed back 19 of that lease's tokens and created them.
import { defineLimit } from '@tiered-limiter/core';
import { TieredLimiter } from '@tiered-limiter/local';
import { RedisStore } from '@tiered-limiter/redis';
import { uniquePrefix } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { redisFileKit } from './src/redis-file-kit.js';

/** Nothing refills during the test: what is admitted is counted exactly. */
const OLD = defineLimit({ capacity: 100, refillPerSecond: 0.001, name: 'old' });
const NEW = defineLimit({ capacity: 100, refillPerSecond: 0.001, name: 'new' });
const TTL_MS = 3_600_000;
/** The store's hold of a grant: the lease's life and its grace (half of it). */
const HOLD_MS = TTL_MS * 1.5;
const PAUSE_MS = 300;
const COOLDOWN_MS = 500;

const { server, track, redis: connect } = redisFileKit();

async function store(prefix: string): Promise<RedisStore> {
  const redis = await connect();
  return new RedisStore({ redis, prefix });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How many of `n` decisions for `key` are admitted, one after another. */
async function admitted(limiter: TieredLimiter, key: string, n: number): Promise<number> {
  let count = 0;
  for (let i = 0; i < n; i++) {
    if ((limiter.tryConsume(key) ?? (await limiter.consume(key))).allowed) count++;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return count;
}

/** A limiter under `OLD` whose breaker opens at the first failure. */
async function limiterOn(prefix: string): Promise<TieredLimiter> {
  const limiter = new TieredLimiter({
    store: await store(prefix),
    limits: OLD,
    sync: false,
    failurePolicy: 'closed',
    timeoutMs: 50,
    breaker: { failureThreshold: 1, cooldownMs: COOLDOWN_MS },
    lease: { minBatch: 20, ttlMs: TTL_MS },
  });
  track(limiter);
  return limiter;
}

/** Another connection to the limiter's keys, with the script loaded: a first call may load it past the timeout. */
async function otherHolder(prefix: string): Promise<RedisStore> {
  const other = await store(prefix);
  await other.apply({ key: 'warm-up', limits: [OLD] });
  return other;
}

/** Another holder's lease of 20 on the new bucket, in the generation of a grant made just before. */
async function leaseElsewhere(other: RedisStore): Promise<void> {
  const lease = await other.apply({
    key: 'k',
    limits: [NEW],
    reserve: { want: 20, min: 1, holdMs: HOLD_MS },
  });
  expect(lease.granted).toBe(20);
}

describe('setLimits to a renamed limit while the breaker is open', () => {
  it('the old lease, handed back after the recovery, credits the old bucket, never the new one', async () => {
    const prefix = uniquePrefix('limits-outage');
    const limiter = await limiterOn(prefix);
    const other = await otherHolder(prefix);
    expect(await admitted(limiter, 'k', 1)).toBe(1);

    const opened = new Promise<void>((resolve) => limiter.once('degraded', () => resolve()));
    await server.client().call('CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL');
    expect(await limiter.consume('elsewhere')).toMatchObject({ allowed: false, tier: 'fallback' });
    await opened;
    // The drain's hand-back of 19 (and its spend of 1) is refused: the breaker is open.
    limiter.setLimits(NEW);
    await sleep(PAUSE_MS + 50);

    // Another holder (an instance of the fleet) leases 20 of the new bucket, in the generation the
    // old grant had (same hold, within one step of it).
    const lease = await other.apply({
      key: 'k',
      limits: [NEW],
      reserve: { want: 20, min: 1, holdMs: HOLD_MS },
    });
    expect(lease.granted).toBe(20);
    await sleep(COOLDOWN_MS);

    // The new bucket had 100: 20 on lease elsewhere, so 80 at most here.
    expect(await admitted(limiter, 'k', 150)).toBe(80);
    const look = await other.apply({ key: 'k', limits: [NEW] });
    expect(look.remaining).toBe(0);
    // The old bucket got its 19 back: 1 spent of 100.
    expect((await other.apply({ key: 'k', limits: [OLD] })).remaining).toBe(99);
  });

  it('a grant asked under the old limits that lands after them goes back to the old bucket, though refused at first', async () => {
    const prefix = uniquePrefix('limits-outage-late');
    const limiter = await limiterOn(prefix);
    const other = await otherHolder(prefix);
    const opened = new Promise<void>((resolve) => limiter.once('degraded', () => resolve()));
    await server.client().call('CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL');
    // The key's first lease (20 under the old limits) is on the wire; it times out and opens the breaker.
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, tier: 'fallback' });
    await opened;
    limiter.setLimits(NEW);
    // The pause ends, the grant lands under the replaced limits: its hand-back is refused (open).
    await sleep(PAUSE_MS + 50);
    await leaseElsewhere(other);
    await sleep(COOLDOWN_MS);

    expect(await admitted(limiter, 'k', 150)).toBe(80);
    expect((await other.apply({ key: 'k', limits: [NEW] })).remaining).toBe(0);
    expect((await other.apply({ key: 'k', limits: [OLD] })).remaining).toBe(100);
  });
});
