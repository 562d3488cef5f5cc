/**
 * The shared bucket's three implementations side by side: `apply.lua` on a real Redis (its clock
 * injected), `MemoryStore` on a fake clock, and core's `applyBucketOp` kept as Redis keeps it
 * (`redis-model.ts`), over random sequences of calls: takes (costs 0, 1, up to and past the
 * capacity, negative; borrowing ahead or not), leases, reports, hand-backs, credits, debits, peeks,
 * resets and limits changed under their names, on two keys of one to three limits from the whole
 * accepted range, with steps of 0, µs, ms, days and (on Redis) back. Replies equal to the bit,
 * stored states and TTLs equal to the model's; and a denied op retried after its wait passes, and
 * the limit a reply speaks of is full after its `resetMs`.
 */
import { defineLimit, internal, isSharedBucketFull, type LimitSpec } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import { bucketKeys } from '@tiered-limiter/redis';
import { FakeClock, type RedisServer, startRedis, uniquePrefix } from '@tiered-limiter/test-harness';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EncodableOp, encodeOps, readReplies } from '../src/ops-codec.js';
import { checkWaits, opOf, stepArb, steppedLimit } from './agreement-ops.js';
import { clockedApply } from './clocked-apply.js';
import { RedisModel } from './redis-model.js';
import { readBucket } from './stored-bucket.js';

let server: RedisServer;
let redis: Redis;
const prefix = uniquePrefix('agree');
const clockKey = `${prefix}:clock`;
let runs = 0;

const CLOCKED = clockedApply(clockKey);

beforeAll(async () => {
  server = await startRedis();
  redis = server.client();
});

afterAll(() => server.stop());

/** About Redis's TIME today, in µs; a double holds every µs there. */
const START_US = 1_765_000_000_000_000;

const rateArb = fc.oneof(
  fc.constantFrom(1e-6, 1e9, 100 / 60, 1000 / 3600, 0.001, 999_999_999.999),
  fc.double({ min: -6, max: 9, noNaN: true }).map((e) => Math.min(1e9, Math.max(1e-6, 10 ** e))),
);
const capacityArb = fc.oneof(
  fc.constantFrom(1, 1_000_000_000),
  fc.integer({ min: 1, max: 20 }),
  fc.integer({ min: 1, max: 1_000_000_000 }),
);
const limitArb = fc.record({ capacity: capacityArb, rate: rateArb });

describe('apply.lua, MemoryStore and core agree', () => {
  it('replies, stored states and TTLs over random sequences of calls', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(limitArb, { minLength: 1, maxLength: 3 }),
        fc.array(stepArb, { minLength: 1, maxLength: 25 }),
        // Kept past any test's real time, so only the injected clock ends a TTL.
        fc.integer({ min: 60_000, max: 86_400_000 }),
        // MemoryStore's clock never steps back, and it forgets a bucket full by the limits that
        // made it as soon as its sweep sees it (Redis when the TTL ends): in its runs, time runs
        // forward and a changed limit only refills faster or holds less, so that makes no odds.
        fc.boolean(),
        async (specs, steps, keepMs, withMemory) => {
          const run = ++runs;
          let limits: LimitSpec[] = specs.map(({ capacity, rate }, i) =>
            defineLimit({ capacity, refillPerSecond: rate, name: `l${i}` }),
          );
          const model = new RedisModel(keepMs);
          const clock = new FakeClock(START_US / 1000);
          const memory = new MemoryStore({ clock });
          const generations: Record<string, number[]> = { a: [], b: [] };
          let nowUs = START_US;
          for (const step of steps) {
            nowUs += withMemory ? Math.abs(step.advanceUs) : step.advanceUs;
            clock.set(nowUs / 1000);
            if (step.change !== null) limits = steppedLimit(limits, step.change, withMemory);
            for (const key of model.expire(nowUs)) await redis.del(key);
            const batch: (EncodableOp & { user: string })[] = [];
            for (const o of step.ops) {
              const user = o.user ? 'b' : 'a';
              const op = opOf(o, `${run}${user}`, limits, generations[user]!);
              batch.push({
                op,
                keys: bucketKeys(prefix, op.key, limits),
                user,
                reset: o.kind === 'reset' || undefined,
              });
            }
            if (withMemory) resyncFull(model, batch, limits, nowUs);
            const expected = batch.map(({ op, keys, reset }) => {
              if (!reset) {
                const reply = model.apply(keys, op, nowUs);
                checkWaits(model, keys, op, reply, nowUs);
                return reply;
              }
              model.reset(keys, op.limits, nowUs);
              return undefined;
            });
            model.finish(nowUs);
            const [numKeys, ...rest] = encodeOps(batch, keepMs);
            await redis.set(clockKey, String(nowUs));
            const replies = readReplies(await redis.eval(CLOCKED, numKeys as number, ...rest), batch);
            for (let i = 0; i < batch.length; i++) {
              const { op, user } = batch[i]!;
              const want = expected[i];
              if (want === undefined) {
                if (withMemory) await memory.reset(op.key, op.limits);
                continue;
              }
              expect(replies[i], `call ${steps.indexOf(step)}, op ${i}`).toEqual(want);
              if (withMemory) expect(await memory.apply(op)).toEqual(want);
              if (want.generation > 0) generations[user]!.push(want.generation);
            }
            for (const key of model.touched) {
              const kept = model.kept.get(key);
              if (kept === undefined) {
                expect(await redis.exists(key)).toBe(0);
                continue;
              }
              expect(await readBucket(redis, key)).toEqual(kept.state);
              const ttl = await redis.pttl(key);
              expect(ttl).toBeLessThanOrEqual(kept.ttlMs);
              expect(ttl).toBeGreaterThan(kept.ttlMs - 2000);
            }
          }
        },
      ),
      { numRuns: 400 },
    );
  });
});

/**
 * A bucket full by the limits that last wrote it may be gone from `MemoryStore` (its sweep) while
 * Redis keeps it until its TTL ends. Once refill reached the capacity it holds exactly that, as a
 * new bucket does, under the limits now too (they only refill faster and hold less); within
 * `TOKEN_EPSILON` short of it, which slow rates spend a millisecond in, it is not quite. Such a key
 * is reset first on all three, so that they start alike.
 */
function resyncFull(
  model: RedisModel,
  batch: (EncodableOp & { user: string })[],
  limits: readonly LimitSpec[],
  nowUs: number,
): void {
  const seen = new Set<string>();
  for (const { op, keys } of [...batch]) {
    if (seen.has(op.key)) continue;
    seen.add(op.key);
    const almost = keys.some((key, i) => {
      const kept = model.kept.get(key);
      if (kept === undefined || !settledFull(model, key, kept.spec, nowUs)) return false;
      const [now] = model.load([key], [limits[i]!], nowUs);
      internal.settleSharedBucket(now!, limits[i]!, nowUs);
      return now!.held.length > 0 || now!.tokens !== limits[i]!.capacity;
    });
    if (almost) batch.unshift({ op: { key: op.key, limits }, keys, user: '', reset: true });
  }
}

function settledFull(model: RedisModel, key: string, spec: LimitSpec, nowUs: number): boolean {
  const [state] = model.load([key], [spec], nowUs);
  internal.settleSharedBucket(state!, spec, nowUs);
  return isSharedBucketFull(state!, spec);
}
