/**
 * The four Lua scripts called directly with EVAL, on a real Redis: exact replies, the state they
 * store, and their arithmetic against core's bucket.ts, bit for bit.
 */
import {
  covers,
  defineLimit,
  type LimitSpec,
  msUntilFull,
  msUntilTokens,
  perMinute,
  refilled,
  TOKEN_EPSILON,
  wholeTokens,
} from '@tiered-limiter/core';
import { bucketKey, KEY_TTL_MARGIN_MS, RedisStore } from '@tiered-limiter/redis';
import { type RedisServer, startRedis, uniquePrefix } from '@tiered-limiter/test-harness';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCRIPTS } from '../src/scripts.js';

let server: RedisServer;
let redis: Redis;
const prefix = uniquePrefix('scripts');
let counter = 0;

beforeAll(async () => {
  server = await startRedis();
  redis = server.client();
});

afterAll(() => server.stop());

/** Keys for `count` limits of one new user, sharing one hash tag as the store's keys do. */
function keysFor(count: number): string[] {
  const tag = `u${++counter}`;
  return Array.from({ length: count }, (_, i) => `${prefix}:{${tag}}:l${i}`);
}

function limitArgs(limits: readonly LimitSpec[]): number[] {
  return limits.flatMap((spec) => [spec.capacity, spec.refillPerSecond]);
}

async function evalScript(lua: string, keys: string[], head: number[], limits: readonly LimitSpec[]) {
  return (await redis.eval(lua, keys.length, ...keys, ...head, ...limitArgs(limits))) as number[];
}

const take = (keys: string[], limits: readonly LimitSpec[], cost: number) =>
  evalScript(SCRIPTS.take, keys, [cost], limits);
const reserve = (keys: string[], limits: readonly LimitSpec[], want: number, min: number) =>
  evalScript(SCRIPTS.reserve, keys, [want, min], limits);
const refund = (keys: string[], limits: readonly LimitSpec[], tokens: number) =>
  evalScript(SCRIPTS.refund, keys, [tokens], limits);
const peek = (keys: string[], limits: readonly LimitSpec[]) => evalScript(SCRIPTS.peek, keys, [], limits);

/** Redis's clock, in µs. */
async function serverMicros(): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1_000_000 + Number(micros);
}

/**
 * Writes a bucket whose `ts` is an hour ahead of Redis's clock: to the script the clock has
 * stepped back, so nothing refills and every reply is exact, whatever the time the test takes.
 */
async function frozen(key: string, tokens: number): Promise<number> {
  const ts = (await serverMicros()) + 3_600_000_000;
  await redis.hset(key, 'tokens', String(tokens), 'ts', String(ts));
  return ts;
}

async function state(key: string): Promise<{ tokens: number; ts: number } | null> {
  const [tokens, ts] = await redis.hmget(key, 'tokens', 'ts');
  return tokens === null || ts === null ? null : { tokens: Number(tokens), ts: Number(ts) };
}

const ten = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'ten' });

describe('take', () => {
  it('admits a new key (capacity 100, 10/s, cost 1): [1, 99, 0, 100, 100], and stores 99 tokens', async () => {
    const spec = defineLimit({ capacity: 100, refillPerSecond: 10 });
    const [key] = keysFor(1);
    const before = await serverMicros();
    expect(await take([key!], [spec], 1)).toEqual([1, 99, 0, 100, 100]);
    const stored = await state(key!);
    expect(stored?.tokens).toBe(99);
    expect(stored!.ts).toBeGreaterThanOrEqual(before);
    expect(stored!.ts).toBeLessThanOrEqual(await serverMicros());
    const ttl = await redis.pttl(key!);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(100 + KEY_TTL_MARGIN_MS);
  });

  it('denies, rounding the waits up to whole ms, and writes nothing', async () => {
    const [key] = keysFor(1);
    await frozen(key!, 0.5);
    const before = await redis.hgetall(key!);
    expect(await take([key!], [ten], 1)).toEqual([0, 0, 500, 9500, 10]);
    expect(await redis.hgetall(key!)).toEqual(before);
    expect(await redis.pttl(key!)).toBe(-1);
  });

  it('admits with 1e-9 of slack: 0.9999999999 tokens cover a cost of 1', async () => {
    const [key] = keysFor(1);
    const ts = await frozen(key!, 0.9999999999);
    expect(await take([key!], [ten], 1)).toEqual([1, 0, 0, 10_000, 10]);
    expect(await state(key!)).toEqual({ tokens: 0, ts });
  });

  it('denies 0.999999998 tokens a cost of 1, and asks for 1 ms at least', async () => {
    const [key] = keysFor(1);
    await frozen(key!, 0.999999998);
    expect(await take([key!], [ten], 1)).toEqual([0, 0, 1, 9001, 10]);
  });

  it('never moves the stored time backwards when Redis’s clock steps back', async () => {
    const [key] = keysFor(1);
    const ts = await frozen(key!, 5);
    expect(await take([key!], [ten], 2)).toEqual([1, 3, 0, 7000, 10]);
    expect(await state(key!)).toEqual({ tokens: 3, ts });
  });

  it('takes from every limit or none, and reports the tightest (the first one on a tie)', async () => {
    const wide = defineLimit({ capacity: 20, refillPerSecond: 1 });
    const keys = keysFor(2);
    await frozen(keys[0]!, 5);
    await frozen(keys[1]!, 5);
    expect(await peek(keys, [wide, ten])).toEqual([5, 15_000, 20]);
    expect(await peek([...keys].reverse(), [ten, wide])).toEqual([5, 15_000, 10]);
    expect(await take(keys, [wide, ten], 6)).toEqual([0, 5, 1000, 15_000, 20]);
    expect((await state(keys[0]!))?.tokens).toBe(5);
    expect(await take(keys, [wide, ten], 5)).toEqual([1, 0, 0, 20_000, 20]);
    expect((await state(keys[0]!))?.tokens).toBe(0);
    expect((await state(keys[1]!))?.tokens).toBe(0);
  });
});

describe('reserve', () => {
  it('grants the whole tokens there are, up to want', async () => {
    const [key] = keysFor(1);
    const ts = await frozen(key!, 3.5);
    expect(await reserve([key!], [ten], 5, 1)).toEqual([3, 0, 0, 9500, 10]);
    expect(await state(key!)).toEqual({ tokens: 0.5, ts });
  });

  it('grants nothing below min, says when min tokens are there, and writes nothing', async () => {
    const [key] = keysFor(1);
    await frozen(key!, 2.5);
    const before = await redis.hgetall(key!);
    expect(await reserve([key!], [ten], 5, 3)).toEqual([0, 2, 500, 7500, 10]);
    expect(await redis.hgetall(key!)).toEqual(before);
  });

  it('grants want on a new key and sets its TTL', async () => {
    const [key] = keysFor(1);
    expect(await reserve([key!], [ten], 4, 4)).toEqual([4, 6, 0, 4000, 10]);
    const ttl = await redis.pttl(key!);
    expect(ttl).toBeGreaterThan(4000 - 1000);
    expect(ttl).toBeLessThanOrEqual(4000 + KEY_TTL_MARGIN_MS);
  });
});

describe('refund', () => {
  it('adds tokens back, then deletes the key once the refund fills the bucket', async () => {
    const [key] = keysFor(1);
    const ts = await frozen(key!, 2.5);
    expect(await refund([key!], [ten], 3)).toEqual([5, 4500, 10]);
    expect(await state(key!)).toEqual({ tokens: 5.5, ts });
    expect(await redis.pttl(key!)).toBeLessThanOrEqual(4500 + KEY_TTL_MARGIN_MS);
    expect(await refund([key!], [ten], 100)).toEqual([10, 0, 10]);
    expect(await redis.exists(key!)).toBe(0);
  });

  it('creates no key for a bucket that is full anyway', async () => {
    const [key] = keysFor(1);
    expect(await refund([key!], [ten], 1)).toEqual([10, 0, 10]);
    expect(await redis.exists(key!)).toBe(0);
  });
});

describe('peek', () => {
  it('reports a new key full and creates nothing', async () => {
    const [key] = keysFor(1);
    expect(await peek([key!], [ten])).toEqual([10, 0, 10]);
    expect(await redis.exists(key!)).toBe(0);
  });

  it('reports whole tokens with 1e-9 of slack and writes nothing', async () => {
    const [key] = keysFor(1);
    await frozen(key!, 2.9999999999);
    const before = await redis.hgetall(key!);
    // 7.0000000001 tokens short of full, less the 1e-9 of slack: 7000 ms at 1 per second.
    expect(await peek([key!], [ten])).toEqual([3, 7000, 10]);
    expect(await redis.hgetall(key!)).toEqual(before);
  });
});

/** A bucket as the scripts see it, computed with core's functions: the model of the property tests. */
interface Model {
  reply: number[];
  after: number[];
}

function modelTake(tokens: number[], limits: readonly LimitSpec[], cost: number): Model {
  const allowed = tokens.every((t) => covers(t, cost));
  const after = allowed ? tokens.map((t) => Math.max(0, t - cost)) : tokens;
  const retry = allowed ? 0 : Math.max(...tokens.map((t, i) => msUntilTokens(t, cost, limits[i]!)));
  return { reply: [allowed ? 1 : 0, ...summary(after, limits, retry)], after };
}

function modelReserve(tokens: number[], limits: readonly LimitSpec[], want: number, min: number): Model {
  const available = Math.min(want, ...tokens.map(wholeTokens));
  const granted = available >= min ? available : 0;
  const after = granted > 0 ? tokens.map((t) => Math.max(0, t - granted)) : tokens;
  const retry = granted > 0 ? 0 : Math.max(...tokens.map((t, i) => msUntilTokens(t, min, limits[i]!)));
  return { reply: [granted, ...summary(after, limits, retry)], after };
}

function modelRefund(tokens: number[], limits: readonly LimitSpec[], give: number): Model {
  const after = tokens.map((t, i) => Math.min(limits[i]!.capacity, t + give));
  const [remaining, , resetMs, limit] = summary(after, limits, 0);
  return { reply: [remaining!, resetMs!, limit!], after };
}

/** remaining, retryAfterMs, resetMs, limit: as the stores report them. */
function summary(tokens: number[], limits: readonly LimitSpec[], retry: number): number[] {
  let at = 0;
  tokens.forEach((t, i) => {
    if (wholeTokens(t) < wholeTokens(tokens[at]!)) at = i;
  });
  const reset = Math.max(...tokens.map((t, i) => msUntilFull(t, limits[i]!)));
  return [wholeTokens(tokens[at]!), retry, reset, limits[at]!.capacity];
}

const rate = fc.oneof(
  fc.constantFrom(100 / 60, 1000 / 3600, 1 / 3600, 0.001, 7, 1e9, 999_999_999.999),
  fc.double({ min: 0.001, max: 1e6, noNaN: true, noDefaultInfinity: true }),
);
const capacity = fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 1_000_000_000 }));
const limitArb = fc
  .record({
    capacity,
    rate,
    fill: fc.oneof(fc.constantFrom(0, 1), fc.double({ min: 0, max: 1, noNaN: true })),
  })
  .map(({ capacity, rate, fill }) => ({
    spec: defineLimit({ capacity, refillPerSecond: rate }),
    tokens: capacity * fill,
  }));

describe('arithmetic equals core’s bucket.ts', () => {
  it('on buckets that do not refill: every script replies as core computes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(limitArb, { minLength: 1, maxLength: 3 }),
        fc.constantFrom('take', 'reserve', 'refund', 'peek'),
        fc.integer({ min: 1, max: 1_000_000_000 }),
        fc.integer({ min: 1, max: 1_000_000_000 }),
        async (limits, op, a, b) => {
          const specs = limits.map((l) => l.spec);
          const tokens = limits.map((l) => l.tokens);
          const smallest = Math.min(...specs.map((s) => s.capacity));
          const cost = 1 + (a % smallest);
          const min = 1 + (b % smallest);
          const keys = keysFor(limits.length);
          for (let i = 0; i < keys.length; i++) await frozen(keys[i]!, tokens[i]!);
          let model: Model;
          let reply: number[];
          if (op === 'take') {
            model = modelTake(tokens, specs, cost);
            reply = await take(keys, specs, cost);
          } else if (op === 'reserve') {
            const want = Math.max(min, cost);
            model = modelReserve(tokens, specs, want, min);
            reply = await reserve(keys, specs, want, min);
          } else if (op === 'refund') {
            model = modelRefund(tokens, specs, cost);
            reply = await refund(keys, specs, cost);
          } else {
            model = { reply: modelRefund(tokens, specs, 0).reply, after: tokens };
            reply = await peek(keys, specs);
          }
          expect(reply).toEqual(model.reply);
          // What was written: a bucket left full is deleted; a call that took nothing wrote nothing.
          const wrote = op === 'refund' || (op !== 'peek' && model.reply[0]! > 0);
          for (let i = 0; i < keys.length; i++) {
            const stored = await state(keys[i]!);
            if (!wrote) expect(stored?.tokens).toBe(tokens[i]);
            else if (covers(model.after[i]!, specs[i]!.capacity)) expect(stored).toBeNull();
            else expect(stored?.tokens).toBe(model.after[i]);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('on buckets that refill: the tokens stored are core’s, bit for bit', async () => {
    await fc.assert(
      fc.asyncProperty(
        limitArb,
        fc.integer({ min: 0, max: 100_000_000 }),
        async ({ spec, tokens }, ageMicros) => {
          fc.pre(tokens >= 1);
          const cost = Math.floor(tokens);
          const [key] = keysFor(1);
          const then = (await serverMicros()) - ageMicros;
          await redis.hset(key!, 'tokens', String(tokens), 'ts', String(then));
          const reply = await take([key!], [spec], cost);
          const stored = await state(key!);
          expect(stored).not.toBeNull();
          const elapsedMs = (stored!.ts - then) / 1000;
          const after = Math.max(0, refilled(tokens, elapsedMs, spec) - cost);
          expect(stored!.tokens).toBe(after);
          expect(reply).toEqual([1, wholeTokens(after), 0, msUntilFull(after, spec), spec.capacity]);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('fractional refill (100 per minute)', () => {
  it('neither gains nor loses a token over thousands of writes', async () => {
    const minute = perMinute(100);
    const store = new RedisStore({ redis, prefix: uniquePrefix('drift') });
    const user = 'drift';
    expect(await store.take(user, [minute], 50)).toMatchObject({ allowed: true, remaining: 50 });
    const key = bucketKey(store.prefix, user, minute.name);
    const start = await state(key);
    expect(start?.tokens).toBe(50);
    // Each call refills by a fraction of a token (1/600 per ms) and writes the sum back.
    const deadline = performance.now() + 5_000;
    let calls = 0;
    for (let i = 0; i < 1500 && performance.now() < deadline; i++) {
      expect((await store.take(user, [minute], 1)).allowed).toBe(true);
      await store.refund(user, [minute], 1);
      calls += 2;
    }
    const end = await state(key);
    // One refill over the whole span, in exact arithmetic: 50 + µs / 600,000.
    const exact = 50 + (end!.ts - start!.ts) / 600_000;
    expect(calls).toBeGreaterThanOrEqual(200);
    expect(Math.abs(end!.tokens - exact)).toBeLessThan(TOKEN_EPSILON);
    expect((await store.peek(user, [minute])).remaining).toBe(Math.floor(exact + TOKEN_EPSILON));
  });
});
