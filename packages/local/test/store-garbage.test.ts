// A custom `GlobalStore` whose `apply` resolves what is not a `BucketReply` (nothing, an empty
// object, a number that is not one): the reply is a store failure, decided by the declared policy
// and reported on `failure`, never a rejected `consume` nor a decision built of `undefined`s.
import {
  type BucketOp,
  type BucketReply,
  defineLimit,
  type GlobalStore,
  StoreError,
} from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { fakeTime, limiter } from './sync-kit.js';

const limits = defineLimit({ capacity: 10, refillPerSecond: 10 });
const good: BucketReply = {
  ok: true,
  granted: 1,
  generation: 0,
  remaining: 9,
  retryAfterMs: 0,
  resetMs: 100,
  limitIndex: 0,
};

/** A store that applies each op to a real bucket, then resolves `garbage` instead of the reply. */
function garbageStore(garbage: unknown): GlobalStore {
  const inner = new MemoryStore();
  return {
    apply: async (op: BucketOp) => {
      await inner.apply(op);
      return garbage as BucketReply;
    },
    reset: (key, l) => inner.reset(key, l),
  };
}

const GARBAGE: [string, unknown][] = [
  ['undefined', undefined],
  ['null', null],
  ['an empty object', {}],
  ['only ok', { ok: true }],
  ['ok as a string', { ...good, ok: 'yes' }],
  ['a NaN remaining', { ...good, remaining: Number.NaN }],
  ['a string retryAfterMs', { ...good, ok: false, retryAfterMs: '1000' }],
];

const MAKERS = {
  RequestLimiter: (store: GlobalStore) => new RequestLimiter({ store, limits, failurePolicy: 'closed' }),
  TieredLimiter: (store: GlobalStore) => new TieredLimiter({ store, limits, failurePolicy: 'closed' }),
};

describe.each(Object.entries(MAKERS))('%s over a store that answers garbage', (_name, make) => {
  it.each(GARBAGE)('a reply of %s is decided by the policy and reported', async (_what, garbage) => {
    const l = make(garbageStore(garbage));
    const failures: StoreError[] = [];
    l.on('failure', (error) => failures.push(error));
    const decision = await l.consume('k');
    expect(decision).toMatchObject({ allowed: false, tier: 'fallback', policy: 'closed' });
    expect(failures.length).toBeGreaterThan(0);
    expect(failures[0]).toBeInstanceOf(StoreError);
    expect(failures[0]!.message).toContain('reply');
    const looked = await l.peek('k');
    expect(looked.tier).toBe('fallback');
    await l.close();
  });
});

describe('TieredLimiter over a store whose groupOf throws', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('syncs its leases in arrival order; nothing is thrown out of the tick', async () => {
    const { clock, advance } = fakeTime();
    class ThrowingGroups extends MemoryStore {
      groupOf(): number {
        throw new Error('slot map being refreshed');
      }
    }
    const l = limiter(new ThrowingGroups({ clock }), clock, { sync: { fleetCallsPerSecond: 20 } });
    for (let ms = 0; ms < 1_000; ms += 10) {
      for (const key of ['a', 'b']) l.tryConsume(key) ?? (await l.consume(key));
      await advance(10);
    }
    // The periodic sync ran: its rounds sent refills beyond the two first ones.
    expect(l.stats().refills).toBeGreaterThan(2);
  });
});
