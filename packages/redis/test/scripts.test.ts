/**
 * `apply.lua` called directly with EVAL on a real Redis: exact replies, the state it stores, and
 * its arithmetic against core's shared-bucket.ts, bit for bit (with the clock injected, so every
 * number is exact whatever time the test takes).
 */
import {
  applyBucketOp,
  type BucketOp,
  defineLimit,
  freshSharedBucket,
  internal,
  isSharedBucketFull,
  type LimitSpec,
  perMinute,
  type SharedBucketState,
} from '@tiered-limiter/core';
import { bucketKey, KEY_TTL_MARGIN_MS, MAX_KEEP_AFTER_FULL_MS, RedisStore } from '@tiered-limiter/redis';
import { type RedisServer, startRedis, stopwatch, uniquePrefix } from '@tiered-limiter/test-harness';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeOps, readReplies } from '../src/ops-codec.js';
import { SCRIPTS } from '../src/scripts.js';
import { clockedApply } from './clocked-apply.js';
import { encodeBucket, encodeTextBucket, readBucket } from './stored-bucket.js';

const { msUntilShared, TOKEN_EPSILON } = internal;

let server: RedisServer;
let redis: Redis;
const prefix = uniquePrefix('scripts');
const clockKey = `${prefix}:clock`;
let counter = 0;

const CLOCKED = clockedApply(clockKey);

beforeAll(async () => {
  server = await startRedis();
  redis = server.client();
});

afterAll(() => server.stop());

/** A user key not used before: its buckets are new. */
function newUser(): string {
  return `u${++counter}`;
}

function keysOf(user: string, limits: readonly LimitSpec[]): string[] {
  return limits.map((spec) => bucketKey(prefix, user, spec.name));
}

/**
 * Runs ops through the script (real TIME, or `nowUs` injected) and reads the replies; a key is
 * kept `keepAfterFullMs` once full (0: it expires with the margin alone).
 */
async function run(ops: BucketOp[], nowUs?: number, keepAfterFullMs = 0) {
  const batch = ops.map((op) => ({ op, keys: keysOf(op.key, op.limits) }));
  const [numKeys, ...rest] = encodeOps(batch, keepAfterFullMs);
  if (nowUs !== undefined) await redis.set(clockKey, String(nowUs));
  const reply = await redis.eval(nowUs === undefined ? SCRIPTS.apply : CLOCKED, numKeys as number, ...rest);
  return readReplies(reply, batch);
}

/** Stores `state` as the script stores a bucket, or in the text format of earlier versions. */
async function write(key: string, state: SharedBucketState, text = false): Promise<void> {
  await redis.set(key, text ? encodeTextBucket(state) : encodeBucket(state));
}

const read = (key: string) => readBucket(redis, key);

/**
 * What the script left at `key`: `before` untouched when nothing changed (`after` undefined), no
 * key for a bucket that ends full, else `after` with a TTL of its ms until full plus the margin
 * and `keepMs`.
 */
async function expectStored(
  key: string,
  after: SharedBucketState | undefined,
  before: Buffer | null,
  spec: LimitSpec,
  keepMs: number,
): Promise<void> {
  if (after === undefined) {
    expect(await redis.getBuffer(key)).toEqual(before);
  } else if (isSharedBucketFull(after, spec)) {
    expect(await redis.exists(key)).toBe(0);
  } else {
    expect(await read(key)).toEqual(after);
    const ttl = await redis.pttl(key);
    const full = msUntilShared(after, spec, spec.capacity, NOW);
    expect(ttl).toBeLessThanOrEqual(full + KEY_TTL_MARGIN_MS + keepMs);
    expect(ttl).toBeGreaterThan(Math.min(full + KEY_TTL_MARGIN_MS, 2 ** 53) + keepMs - 2000);
  }
}

/** Redis's clock, in µs. */
async function serverUs(): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1_000_000 + Number(micros);
}

const ten = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'ten' });
/** An injected clock reading, in µs; `ms(n)` is n ms after it. */
const NOW = 1_000_000_000;
const ms = (n: number) => NOW + n * 1000;
/** What a heartbeat entry carries as its bucket op (the store's own stands in no key). */
const FLEET: BucketOp = { key: '', limits: [] };

describe('apply.lua, exact replies', () => {
  it('takes from a new key on TIME, stores it with a TTL of ms until full + the margin', async () => {
    const spec = defineLimit({ capacity: 100, refillPerSecond: 10, name: 'h' });
    const user = newUser();
    const before = await serverUs();
    const [reply] = await run([{ key: user, limits: [spec], take: 1 }]);
    expect(reply).toEqual({
      ok: true,
      granted: 1,
      generation: 0,
      remaining: 99,
      retryAfterMs: 0,
      resetMs: 100,
      limitIndex: 0,
    });
    const stored = await read(keysOf(user, [spec])[0]!);
    expect(stored?.tokens).toBe(99);
    expect(stored!.updatedAtUs).toBeGreaterThanOrEqual(before);
    expect(stored!.updatedAtUs).toBeLessThanOrEqual(await serverUs());
    const ttl = await redis.pttl(keysOf(user, [spec])[0]!);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(100 + KEY_TTL_MARGIN_MS);
  });

  it('denies, rounding waits up to whole ms, and writes nothing', async () => {
    const user = newUser();
    const [key] = keysOf(user, [ten]);
    await write(key!, { tokens: 0.5, updatedAtUs: NOW, held: [] });
    const before = await redis.getBuffer(key!);
    const [reply] = await run([{ key: user, limits: [ten], take: 1 }], NOW);
    expect(reply).toMatchObject({ ok: false, granted: 0, remaining: 0, retryAfterMs: 500, resetMs: 9500 });
    expect(await redis.getBuffer(key!)).toEqual(before);
  });

  it('leases into a generation released holdMs later, and keeps the bucket from refilling its room', async () => {
    const user = newUser();
    const [key] = keysOf(user, [ten]);
    const [lease] = await run(
      [{ key: user, limits: [ten], reserve: { want: 8, min: 1, holdMs: 1500 } }],
      NOW,
    );
    // now + 1500 ms, rounded up to a quantum of 128 ms: released 1600 ms from now. Full 8 s later.
    expect(lease).toEqual({
      ok: true,
      granted: 8,
      generation: ms(1600),
      remaining: 2,
      retryAfterMs: 0,
      resetMs: 9600,
      limitIndex: 0,
    });
    expect(await read(key!)).toEqual({
      tokens: 2,
      updatedAtUs: NOW,
      held: [{ releaseUs: ms(1600), count: 8 }],
    });
    // A second later the bucket has refilled only into the 2 tokens of room the lease left.
    const [later] = await run([{ key: user, limits: [ten] }], ms(1000));
    expect(later).toMatchObject({ remaining: 2 });
    // After the release, the room is back and refills.
    const [released] = await run([{ key: user, limits: [ten] }], ms(2600));
    expect(released).toMatchObject({ remaining: 3 });
  });

  it('takes reports: spends free the room, hand-backs go back in, a released generation changes nothing', async () => {
    const user = newUser();
    const [key] = keysOf(user, [ten]);
    await write(key!, { tokens: 0, updatedAtUs: NOW, held: [{ releaseUs: ms(500), count: 10 }] });
    const [reply] = await run(
      [{ key: user, limits: [ten], reports: [{ generation: ms(500), spent: 3, returned: 4 }] }],
      NOW,
    );
    expect(reply).toMatchObject({ ok: true, remaining: 4 });
    expect(await read(key!)).toEqual({
      tokens: 4,
      updatedAtUs: NOW,
      held: [{ releaseUs: ms(500), count: 3 }],
    });
    // Past the release the 3 still held are gone as spent; a late hand-back of them adds nothing
    // (600 ms at 1/s refilled 0.6 into the room).
    const [late] = await run(
      [{ key: user, limits: [ten], reports: [{ generation: ms(500), spent: 0, returned: 3 }] }],
      ms(600),
    );
    expect(late).toMatchObject({ remaining: 4 });
    expect(await read(key!)).toEqual({ tokens: 4.6, updatedAtUs: ms(600), held: [] });
  });

  it('credits up to the room, debits into debt down to minus the capacity', async () => {
    const user = newUser();
    const [key] = keysOf(user, [ten]);
    await write(key!, { tokens: 2, updatedAtUs: NOW, held: [{ releaseUs: ms(5000), count: 5 }] });
    await run([{ key: user, limits: [ten], credit: 100 }], NOW);
    expect((await read(key!))?.tokens).toBe(5);
    const [debt] = await run([{ key: user, limits: [ten], debit: 100 }], NOW);
    expect((await read(key!))?.tokens).toBe(-10);
    expect(debt).toMatchObject({ ok: false, remaining: 0, retryAfterMs: 11_000 });
  });

  it('speaks of the limit that binds: the denying one, else fewest tokens, else slowest to fill', async () => {
    const second = defineLimit({ capacity: 5, refillPerSecond: 5, name: 'second' });
    const minute = defineLimit({ capacity: 5, refillPerSecond: 5 / 60, name: 'minute' });
    const user = newUser();
    const [first] = await run([{ key: user, limits: [second, minute], take: 1 }], NOW);
    expect(first).toMatchObject({ ok: true, remaining: 4, resetMs: 12_000, limitIndex: 1 });
    await run([{ key: user, limits: [second, minute], take: 4 }], NOW);
    const [denied] = await run([{ key: user, limits: [second, minute], take: 1 }], ms(200));
    expect(denied).toMatchObject({ ok: false, limitIndex: 1, retryAfterMs: 11_800 });
  });

  it('deletes a bucket that ends full with nothing on lease, and creates none for a peek', async () => {
    const user = newUser();
    const [key] = keysOf(user, [ten]);
    await run([{ key: user, limits: [ten] }], NOW);
    expect(await redis.exists(key!)).toBe(0);
    await write(key!, { tokens: 9, updatedAtUs: NOW, held: [] });
    await run([{ key: user, limits: [ten], credit: 1 }], NOW);
    expect(await redis.exists(key!)).toBe(0);
  });

  it('applies several ops on one key in one call in order, writing the key once', async () => {
    const user = newUser();
    const ops: BucketOp[] = Array.from({ length: 12 }, () => ({ key: user, limits: [ten], take: 1 }));
    const replies = await run(ops, NOW);
    expect(replies.map((r) => r.ok)).toEqual([...Array(10).fill(true), false, false]);
    expect((await read(keysOf(user, [ten])[0]!))?.tokens).toBe(0);
  });
});

/** Core's `applyBucketOp` on a copy of `states`: the model the script must equal. */
function model(states: SharedBucketState[], limits: readonly LimitSpec[], op: BucketOp, nowUs: number) {
  const copies = states.map((s) => ({ ...s, held: s.held.map((g) => ({ ...g })) }));
  const reply = applyBucketOp(copies, limits, op, nowUs);
  return { reply, after: copies };
}

const rate = fc.oneof(
  fc.constantFrom(100 / 60, 1000 / 3600, 1 / 3600, 0.001, 7, 1e6),
  fc.double({ min: 0.001, max: 1e5, noNaN: true, noDefaultInfinity: true }),
);

const bucketArb = fc
  .record({
    capacity: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 1_000_000 })),
    rate,
    fill: fc.oneof(fc.constantFrom(-1, 0, 1), fc.double({ min: -1, max: 1, noNaN: true })),
    held: fc.array(
      fc.record({
        in: fc.integer({ min: -800, max: 3000 }),
        share: fc.double({ min: 0, max: 1, noNaN: true }),
      }),
      { maxLength: 3 },
    ),
    age: fc.oneof(fc.constant(0), fc.integer({ min: -50, max: 5000 })),
  })
  .map(({ capacity, rate, fill, held, age }) => {
    const spec = defineLimit({ capacity, refillPerSecond: rate });
    // tokens + held ≤ capacity, tokens ≥ −capacity: the states a store can be in.
    let room = capacity;
    const gens = new Map<number, number>();
    for (const h of held) {
      const count = Math.floor(room * h.share);
      if (count < 1) continue;
      gens.set(ms(h.in), (gens.get(ms(h.in)) ?? 0) + count);
      room -= count;
    }
    // `+ 0` turns a generated −0 into 0: the stored string has no −0 to start from.
    const tokens = (fill < 0 ? capacity * fill : room * fill) + 0;
    const state: SharedBucketState = {
      tokens,
      updatedAtUs: ms(-age),
      held: [...gens].sort((a, b) => a[0] - b[0]).map(([releaseUs, count]) => ({ releaseUs, count })),
    };
    return { spec, state };
  });

const opArb = fc.record({
  kind: fc.constantFrom('take', 'reserve', 'peek'),
  a: fc.integer({ min: 1, max: 1_000_000 }),
  b: fc.integer({ min: 1, max: 1_000_000 }),
  holdMs: fc.integer({ min: 1, max: 5000 }),
  aheadMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5000 })),
  credit: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 50 })),
  debit: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 50 })),
  report: fc.option(
    fc.record({
      pick: fc.nat(),
      spent: fc.integer({ min: 0, max: 5 }),
      returned: fc.integer({ min: 0, max: 5 }),
    }),
  ),
});

describe('the call’s arguments', () => {
  it('carries the keys, then every number as one JSON array, then the heartbeats’ instances', () => {
    const spec = defineLimit({ capacity: 100, refillPerSecond: 0.5, name: 'args' });
    const limits = [spec];
    const args = encodeOps(
      [
        { op: { key: 'u1', limits, take: 2, aheadMs: 20 }, keys: ['k1'] },
        { op: FLEET, keys: ['fleet'], heartbeat: { instance: 'host-1, "a" [b]', ttlMs: 3000 } },
        {
          op: {
            key: 'u2',
            limits,
            reserve: { want: 8, min: 1, holdMs: 1500 },
            reports: [{ generation: 7, spent: 2, returned: 1 }],
          },
          keys: ['k2'],
        },
      ],
      250,
    );
    // E 3, S 1, keep 250 ms; the set (1 limit: 100, 0.5); take 2 with aheadMs 20 (flags 1 + 16);
    // the heartbeat (set 0, instance 1, ttl); reserve 8/1/1500 with one report (flags 2 + 32).
    expect(args).toEqual([
      3,
      'k1',
      'fleet',
      'k2',
      '[3,1,250,1,100,0.5,1,17,2,20,0,1,3000,1,34,8,1,1500,1,7,2,1]',
      'host-1, "a" [b]',
    ]);
  });

  it('writes a take of 1 on one limit, and nothing else, as one number: -set', () => {
    const one = [defineLimit({ capacity: 10, refillPerSecond: 1, name: 'one' })];
    const two = [...one, defineLimit({ capacity: 100, refillPerSecond: 0.5, name: 'two' })];
    const args = encodeOps(
      [
        { op: { key: 'a', limits: one, take: 1 }, keys: ['k1'] },
        { op: { key: 'b', limits: two, take: 1 }, keys: ['k2', 'k3'] },
        { op: { key: 'c', limits: one, take: 1, aheadMs: 5 }, keys: ['k4'] },
        { op: { key: 'd', limits: one, take: 2 }, keys: ['k5'] },
        { op: { key: 'e', limits: one, take: 1, credit: 1 }, keys: ['k6'] },
        { op: { key: 'f', limits: one, take: 1 }, keys: ['k7'] },
      ],
      0,
    );
    // Sets: 1 = one (10, 1), 2 = two. Only a and f are short; b has two limits, c borrows ahead,
    // d takes 2, e credits too.
    expect(args.at(-1)).toBe('[6,2,0,1,10,1,2,10,1,100,0.5,-1,2,1,1,1,17,1,5,1,1,2,1,5,1,1,-1]');
  });

  it('answers a short take in 2 integers when admitted and 3 when refused', async () => {
    const user = newUser();
    const limits = [defineLimit({ capacity: 2, refillPerSecond: 1, name: 'short' })];
    const batch = [1, 2, 3].map(() => ({ op: { key: user, limits, take: 1 }, keys: keysOf(user, limits) }));
    const [numKeys, ...rest] = encodeOps(batch, 0);
    await redis.set(clockKey, String(NOW));
    const reply = (await redis.eval(CLOCKED, numKeys as number, ...rest)) as number[];
    // 1 left (+1), full in 1000 ms; 0 left (+1), full in 2000 ms; refused: 0 left, 1000 ms, 2000 ms.
    expect(reply).toEqual([2, 1000, 1, 2000, 0, 1000, 2000]);
    expect(readReplies(reply, batch)).toEqual([
      { ok: true, granted: 1, generation: 0, remaining: 1, retryAfterMs: 0, resetMs: 1000, limitIndex: 0 },
      { ok: true, granted: 1, generation: 0, remaining: 0, retryAfterMs: 0, resetMs: 2000, limitIndex: 0 },
      {
        ok: false,
        granted: 0,
        generation: 0,
        remaining: 0,
        retryAfterMs: 1000,
        resetMs: 2000,
        limitIndex: 0,
      },
    ]);
    // A reply one integer short, or long, is not ours.
    expect(() => readReplies(reply.slice(0, -1), batch)).toThrow(/unexpected reply/);
    expect(() => readReplies([...reply, 0], batch)).toThrow(/unexpected reply/);
  });

  it('answers a short take on a key with tokens on lease as core does', async () => {
    const user = newUser();
    const limits = [ten];
    const [key] = keysOf(user, limits);
    await run([{ key: user, limits, reserve: { want: 8, min: 1, holdMs: 1500 } }], NOW);
    // The lease left 2 of 10: two takes pass, the third is refused; the script's general path
    // answers them (tokens on lease), shortened.
    let state = (await read(key!))!;
    expect(state.held).toHaveLength(1);
    const ops: BucketOp[] = [1, 2, 3].map(() => ({ key: user, limits, take: 1 }));
    const expected = ops.map((op) => {
      const step = model([state], limits, op, NOW);
      state = step.after[0]!;
      return step.reply;
    });
    expect(expected.map((r) => r.ok)).toEqual([true, true, false]);
    expect(await run(ops, NOW)).toEqual(expected);
  });

  it('registers an instance whatever its name holds: commas, quotes and brackets are not numbers', async () => {
    const fleet = `${prefix}:fleet:${newUser()}`;
    const name = 'host-1, "a" [b]';
    const args = encodeOps([{ op: FLEET, keys: [fleet], heartbeat: { instance: name, ttlMs: 60_000 } }], 0);
    const [numKeys, ...rest] = args;
    const reply = await redis.eval(SCRIPTS.apply, numKeys as number, ...rest);
    expect(reply).toEqual([1, 1, 0, 0, 0, 0, 0]);
    expect(await redis.zrange(fleet, 0, -1)).toEqual([name]);
  });
});

describe('apply.lua equals core’s applyBucketOp', () => {
  it('reply, stored state and TTL, bit for bit, over random states and ops', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(bucketArb, { minLength: 1, maxLength: 3 }),
        opArb,
        fc.integer({ min: 0, max: MAX_KEEP_AFTER_FULL_MS }),
        fc.boolean(),
        async (buckets, o, keepMs, seededAsText) => {
          const names = buckets.map((_, i) => `l${i}`);
          const limits = buckets.map((b, i) =>
            defineLimit({
              capacity: b.spec.capacity,
              refillPerSecond: b.spec.refillPerSecond,
              name: names[i],
            }),
          );
          const states = buckets.map((b) => b.state);
          const smallest = Math.min(...limits.map((l) => l.capacity));
          const generations = [...new Set(states.flatMap((s) => s.held.map((g) => g.releaseUs)))];
          const report =
            o.report === null
              ? undefined
              : {
                  generation: generations[o.report.pick % Math.max(1, generations.length)] ?? ms(1),
                  spent: o.report.spent,
                  returned: o.report.returned,
                };
          const user = newUser();
          const op: BucketOp = {
            key: user,
            limits,
            ...(report ? { reports: [report] } : {}),
            ...(o.credit > 0 ? { credit: o.credit } : {}),
            ...(o.debit > 0 ? { debit: o.debit } : {}),
            ...(o.aheadMs > 0 ? { aheadMs: o.aheadMs } : {}),
            ...(o.kind === 'take' ? { take: 1 + (o.a % smallest) } : {}),
            ...(o.kind === 'reserve'
              ? {
                  reserve: {
                    want: 1 + (o.a % smallest),
                    min: 1 + (Math.min(o.a, o.b) % smallest),
                    holdMs: o.holdMs,
                  },
                }
              : {}),
          };
          const keys = keysOf(user, limits);
          for (let i = 0; i < keys.length; i++) await write(keys[i]!, states[i]!, seededAsText);
          const before = await Promise.all(keys.map((k) => redis.getBuffer(k)));
          const expected = model(states, limits, op, NOW);
          const [reply] = await run([op], NOW, keepMs);
          expect(reply).toEqual(expected.reply);
          const changed = report !== undefined || o.credit > 0 || o.debit > 0 || expected.reply.granted > 0;
          for (let i = 0; i < keys.length; i++) {
            await expectStored(
              keys[i]!,
              changed ? expected.after[i]! : undefined,
              before[i]!,
              limits[i]!,
              keepMs,
            );
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('apply.lua’s plain take (one limit, nothing on lease) equals core’s applyBucketOp', () => {
  // The script answers this shape, its most common entry, by a path of its own: the property
  // above reaches it in a few runs of 300, so it gets its own, with several takes on the key in
  // one call (each sees the one before) and keys never seen.
  it('reply, stored state and TTL, bit for bit, for 1–4 takes on one key in one call', async () => {
    await fc.assert(
      fc.asyncProperty(
        bucketArb,
        fc.array(
          fc.record({
            // 0: a take of 1, which the script reads as one number and answers short
            a: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 1_000_000 })),
            aheadMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5000 })),
          }),
          { minLength: 1, maxLength: 4 },
        ),
        // `lowered`: more tokens stored than the capacity holds, as after the limit was lowered.
        fc.constantFrom('absent', 'binary', 'text', 'lowered'),
        fc.integer({ min: 0, max: MAX_KEEP_AFTER_FULL_MS }),
        async (bucket, takes, seed, keepMs) => {
          const limits = [
            defineLimit({ capacity: bucket.spec.capacity, refillPerSecond: bucket.spec.refillPerSecond }),
          ];
          const spec = limits[0]!;
          const user = newUser();
          const [key] = keysOf(user, limits);
          let state: SharedBucketState =
            seed === 'absent' ? freshSharedBucket(spec, NOW) : { ...bucket.state, held: [] };
          if (seed === 'lowered') state = { ...state, tokens: spec.capacity * 1.5 + 0.25 };
          if (seed !== 'absent') await write(key!, state, seed === 'text');
          const before = await redis.getBuffer(key!);
          const ops: BucketOp[] = takes.map(({ a, aheadMs }) => ({
            key: user,
            limits,
            take: a === 0 ? 1 : 1 + (a % spec.capacity),
            ...(aheadMs > 0 ? { aheadMs } : {}),
          }));
          let changed = false;
          const expected = ops.map((op) => {
            const step = model([state], limits, op, NOW);
            state = step.after[0]!;
            if (step.reply.granted > 0) changed = true;
            return step.reply;
          });
          expect(await run(ops, NOW, keepMs)).toEqual(expected);
          await expectStored(key!, changed ? state : undefined, before, spec, keepMs);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses a value that starts as a stored bucket but is cut short', async () => {
    const user = newUser();
    const [key] = keysOf(user, [ten]);
    const stored = encodeBucket({ tokens: 5, updatedAtUs: NOW, held: [] });
    await redis.set(key!, stored.subarray(0, 12));
    await expect(run([{ key: user, limits: [ten], take: 1 }], NOW)).rejects.toThrow(/WRONGTYPE/);
    expect(await redis.getBuffer(key!)).toEqual(stored.subarray(0, 12));
  });
});

describe('fractional refill (100 per minute)', () => {
  it('neither gains nor loses a token over thousands of writes', async () => {
    const minute = perMinute(100);
    const store = new RedisStore({ redis, prefix: uniquePrefix('drift') });
    const user = 'drift';
    expect(await store.apply({ key: user, limits: [minute], take: 50 })).toMatchObject({
      ok: true,
      remaining: 50,
    });
    const key = bucketKey(store.prefix, user, minute.name);
    const start = await read(key);
    expect(start?.tokens).toBe(50);
    // Each call refills by a fraction of a token (1/600 per ms) and writes the sum back.
    const deadline = performance.now() + 5_000;
    let calls = 0;
    for (let i = 0; i < 1500 && performance.now() < deadline; i++) {
      expect((await store.apply({ key: user, limits: [minute], take: 1 })).ok).toBe(true);
      await store.apply({ key: user, limits: [minute], credit: 1 });
      calls += 2;
    }
    const sinceEnd = stopwatch();
    const end = await read(key);
    // One refill over the whole span, in exact arithmetic: 50 + µs / 600,000.
    const exact = 50 + (end!.updatedAtUs - start!.updatedAtUs) / 600_000;
    expect(calls).toBeGreaterThanOrEqual(200);
    expect(Math.abs(end!.tokens - exact)).toBeLessThan(TOKEN_EPSILON);
    // The last call refills for the time since the state was read too: on a loaded machine that
    // was enough, once, to cross into the next whole token (51 for 50). It may add what that time
    // refills, and nothing more; it may lose nothing.
    const { remaining } = await store.apply({ key: user, limits: [minute] });
    const refilledSince = sinceEnd() / 600;
    expect(remaining).toBeGreaterThanOrEqual(Math.floor(exact + TOKEN_EPSILON));
    expect(remaining).toBeLessThanOrEqual(Math.floor(exact + TOKEN_EPSILON + refilledSince));
  });
});
