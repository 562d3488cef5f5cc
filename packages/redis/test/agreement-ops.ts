/**
 * The calls of `agreement.property.test.ts`: random steps (a clock step, maybe a limit changed under
 * its name, one to three ops) and the checks a reply must pass whatever store gave it.
 */
import {
  applyBucketOp,
  type BucketOp,
  type BucketReply,
  defineLimit,
  internal,
  type LimitSpec,
} from '@tiered-limiter/core';
import fc from 'fast-check';
import { expect } from 'vitest';
import type { RedisModel } from './redis-model.js';

const { covers, MAX_WAIT_MS, settleSharedBucket } = internal;

const DAY_MS = 86_400_000;

const opDrawArb = fc.record({
  user: fc.boolean(),
  kind: fc.constantFrom('take', 'take', 'reserve', 'report', 'credit', 'debit', 'peek', 'reset', 'mixed'),
  // A cost: 0, 1, a share of the smallest capacity, all of it, one past it, or −1.
  cost: fc.oneof(fc.constantFrom(0, 1, -1, 'all', 'past'), fc.double({ min: 0, max: 1, noNaN: true })),
  aheadMs: fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 1, max: 5000 })),
  want: fc.double({ min: 0, max: 1, noNaN: true }),
  min: fc.double({ min: 0, max: 1, noNaN: true }),
  holdMs: fc.oneof(fc.integer({ min: 1, max: 5000 }), fc.integer({ min: 1, max: 3_600_000 })),
  pick: fc.nat(),
  spent: fc.integer({ min: 0, max: 5 }),
  returned: fc.integer({ min: 0, max: 5 }),
  amount: fc.oneof(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 2_000_000_000 })),
});
export type OpDraw = typeof opDrawArb extends fc.Arbitrary<infer T> ? T : never;

export const stepArb = fc.record({
  advanceUs: fc.oneof(
    { arbitrary: fc.constant(0), weight: 2 },
    { arbitrary: fc.integer({ min: 1, max: 999 }), weight: 2 },
    { arbitrary: fc.integer({ min: 1, max: 5_000 }).map((ms) => ms * 1000), weight: 4 },
    { arbitrary: fc.integer({ min: 1, max: 30 * DAY_MS }).map((ms) => ms * 1000), weight: 1 },
    { arbitrary: fc.integer({ min: -10_000_000, max: -1 }), weight: 1 },
  ),
  change: fc.option(
    fc.record({
      index: fc.nat(),
      capacity: fc.integer({ min: 1, max: 1_000_000_000 }),
      rate: fc.double({ min: -6, max: 9, noNaN: true }),
    }),
    { freq: 6 },
  ),
  ops: fc.array(opDrawArb, { minLength: 1, maxLength: 3 }),
});
export type Step = typeof stepArb extends fc.Arbitrary<infer T> ? T : never;

/**
 * `limits` with one changed under its name (`setLimits`). `monotone`: only to refill faster and hold
 * no more, so that a bucket full by the old limit is full by the new one.
 */
export function steppedLimit(
  limits: LimitSpec[],
  change: NonNullable<Step['change']>,
  monotone: boolean,
): LimitSpec[] {
  const i = change.index % limits.length;
  const old = limits[i]!;
  let capacity = change.capacity;
  let rate = Math.min(1e9, Math.max(1e-6, 10 ** change.rate));
  if (monotone) {
    capacity = Math.min(capacity, old.capacity);
    rate = Math.max(rate, old.refillPerSecond);
  }
  const next = limits.slice();
  next[i] = defineLimit({ capacity, refillPerSecond: rate, name: old.name });
  return next;
}

function costOf(draw: OpDraw['cost'], smallest: number): number {
  if (draw === 'all') return smallest;
  if (draw === 'past') return smallest + 1;
  if (typeof draw === 'number' && !Number.isInteger(draw)) return 1 + Math.floor(draw * (smallest - 1));
  return draw as number;
}

/** The op a draw stands for, on `key`; a report names one of the key's generations, or none. */
export function opOf(o: OpDraw, key: string, limits: readonly LimitSpec[], generations: number[]): BucketOp {
  const smallest = Math.min(...limits.map((l) => l.capacity));
  const ahead = o.aheadMs > 0 ? { aheadMs: o.aheadMs } : {};
  const reports = [
    {
      generation: generations[o.pick % Math.max(1, generations.length)] ?? 1_000_000 + o.pick,
      spent: o.spent,
      returned: o.returned,
    },
  ];
  const take = { take: costOf(o.cost, smallest), ...ahead };
  switch (o.kind) {
    case 'take':
      return { key, limits, ...take };
    case 'reserve': {
      const want = 1 + Math.floor(o.want * (smallest - 1));
      const min = 1 + Math.floor(o.min * (want - 1));
      return { key, limits, reserve: { want, min, holdMs: o.holdMs }, ...ahead };
    }
    case 'report':
      return { key, limits, reports };
    case 'credit':
      return { key, limits, credit: o.amount };
    case 'debit':
      return { key, limits, debit: o.amount };
    case 'mixed':
      return { key, limits, reports, ...(o.user ? { credit: o.amount } : { debit: o.amount }), ...take };
    default:
      return { key, limits };
  }
}

/**
 * A denied take or lease, asked again after exactly its `retryAfterMs` with no traffic between,
 * passes; the limit the reply speaks of is full after its `resetMs`. Not checked for a wait at its
 * cap, an op borrowing ahead (its wait is for fewer tokens), a cost past the capacity, or a bucket
 * stamped after now (a clock that stepped back: the bucket refills again only from its stamp), or a
 * time past 2^53 µs (year 2255 on Redis's clock), where µs are no longer whole numbers: a debt of 10^8
 * tokens at 10^-6/s is full 4,500 years on, and there the refill is a rounding short of the capacity.
 */
export function checkWaits(
  model: RedisModel,
  keys: readonly string[],
  op: BucketOp,
  reply: BucketReply,
  nowUs: number,
): void {
  const limits = op.limits;
  const after = () => model.load(keys, limits, nowUs);
  if (after().some((s) => s.updatedAtUs > nowUs)) return;
  const smallest = Math.min(...limits.map((l) => l.capacity));
  const asked =
    op.take !== undefined && op.take > 0 && op.take <= smallest
      ? { take: op.take }
      : op.reserve !== undefined && op.reserve.want > 0
        ? { reserve: op.reserve }
        : undefined;
  const reachable = (ms: number) => ms < MAX_WAIT_MS && nowUs + ms * 1000 <= Number.MAX_SAFE_INTEGER;
  if (!reply.ok && asked !== undefined && op.aheadMs === undefined && reachable(reply.retryAfterMs)) {
    const later = nowUs + reply.retryAfterMs * 1000;
    const retried = applyBucketOp(after(), limits, { key: op.key, limits, ...asked }, later);
    expect(retried.ok, `retried ${reply.retryAfterMs} ms later`).toBe(true);
  }
  if (reachable(reply.resetMs)) {
    const spec = limits[reply.limitIndex]!;
    const state = after()[reply.limitIndex]!;
    settleSharedBucket(state, spec, nowUs + reply.resetMs * 1000);
    expect(covers(state.tokens, spec.capacity), `full ${reply.resetMs} ms later`).toBe(true);
  }
}
