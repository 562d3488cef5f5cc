/**
 * A `RedisClientAdapter` that throws where it should answer: the ops it carried fail with a
 * `StoreError`, the store keeps sending later ops, and nothing is thrown out of the store's flush.
 */
import { defineLimit, StoreError } from '@tiered-limiter/core';
import { describe, expect, it } from 'vitest';
import type { RedisClientAdapter } from '../src/index.js';
import { RedisStore } from '../src/index.js';

const limits = [defineLimit({ capacity: 10, refillPerSecond: 1, name: 'x' })];

/** A Cluster adapter of one node whose `nodeOf` throws on call `throwAt` (a topology being refreshed) and whose calls fail. */
function throwingAdapter(throwAt: number): RedisClientAdapter & { readonly sent: number } {
  let asked = 0;
  let sent = 0;
  return {
    client: 'throwing',
    isCluster: true,
    nodeOf: () => {
      asked++;
      if (asked === throwAt) throw new Error('slot map being refreshed');
      return 'n1';
    },
    get sent() {
      return sent;
    },
    evalScript: async (_script, calls) => {
      sent += calls.length;
      return calls.map(() => new Error('node down'));
    },
  };
}

describe('RedisStore over an adapter whose nodeOf throws', () => {
  it('fails the flush’s ops with a StoreError and goes on sending later ones', async () => {
    // Two keys of two slots in one tick: the flush asks nodeOf again (its third call) to group them by node.
    const adapter = throwingAdapter(3);
    const store = new RedisStore({ redis: adapter, coalesce: { maxKeysPerCall: 32, maxInFlight: 1 } });
    const first = await Promise.allSettled([
      store.apply({ key: 'a', limits, take: 1 }),
      store.apply({ key: 'b', limits, take: 1 }),
    ]);
    for (const outcome of first) {
      expect(outcome.status).toBe('rejected');
      const error = (outcome as PromiseRejectedResult).reason;
      expect(error).toBeInstanceOf(StoreError);
      expect((error as StoreError).cause).toEqual(new Error('slot map being refreshed'));
    }
    expect(adapter.sent).toBe(0);
    // The destination's one call in flight was given back: a later op is sent.
    const later = await store.apply({ key: 'c', limits, take: 1 }).catch((error: unknown) => error);
    expect(later).toBeInstanceOf(StoreError);
    expect(adapter.sent).toBe(1);
  });
});

/** Whether `promise` has settled after the pending microtasks and two turns of the event loop (no timer is involved). */
async function settledSoon(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('RedisStore over an adapter that answers garbage', () => {
  const answers: [string, (calls: readonly unknown[]) => unknown][] = [
    ['undefined', () => undefined],
    ['null', () => null],
    ['a string', () => 'OK'],
    ['too few results', () => []],
  ];
  it.each(answers)(
    'an evalScript resolving %s fails the ops with a StoreError, and later ops are sent',
    async (_what, answer) => {
      let sent = 0;
      const adapter: RedisClientAdapter = {
        client: 'garbage',
        isCluster: false,
        nodeOf: () => 'n1',
        evalScript: async (_script, calls) => {
          sent++;
          return answer(calls) as unknown[];
        },
      };
      const store = new RedisStore({ redis: adapter, coalesce: { maxKeysPerCall: 32, maxInFlight: 1 } });
      const applied = store.apply({ key: 'a', limits, take: 1 });
      expect(await settledSoon(applied)).toBe(true);
      expect(await applied.catch((error: unknown) => error)).toBeInstanceOf(StoreError);
      // The destination's one call in flight was given back.
      const later = store.apply({ key: 'b', limits, take: 1 });
      expect(await settledSoon(later)).toBe(true);
      expect(sent).toBe(2);
    },
  );

  it('a redirected call whose retry throws synchronously, or answers nothing, fails its ops with a StoreError', async () => {
    for (const retry of [
      () => {
        throw new Error('cluster closed');
      },
      () => Promise.resolve(undefined as unknown as unknown[]),
    ]) {
      let calls = 0;
      // Two slots on one node in one call; the first answer redirects both.
      const adapter: RedisClientAdapter = {
        client: 'redirecting',
        isCluster: true,
        nodeOf: () => 'n1',
        evalScript: (_script, batch) => {
          calls++;
          if (calls === 1) return Promise.resolve(batch.map(() => new Error('MOVED 1 127.0.0.1:7000')));
          return retry();
        },
      };
      const store = new RedisStore({ redis: adapter, coalesce: { maxKeysPerCall: 32, maxInFlight: 1 } });
      const applied = Promise.allSettled([
        store.apply({ key: 'a', limits, take: 1 }),
        store.apply({ key: 'b', limits, take: 1 }),
      ]);
      expect(await settledSoon(applied)).toBe(true);
      for (const outcome of await applied) {
        expect(outcome.status).toBe('rejected');
        expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(StoreError);
      }
    }
  });
});
