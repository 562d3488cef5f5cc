import { defineLimit, type GlobalStore, perMinute } from '@tiered-limiter/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { sleepUntil, stopwatch } from './real-time.js';

/** 100 tokens, 10 per second: the example; one token every 100 ms. */
const hundred = defineLimit({ capacity: 100, refillPerSecond: 10, name: 'hundred' });
/** 10 tokens, one per 1,000 s: no refill worth a token during a test. */
const slow = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'slow' });
/** 1,000 s per token, in ms. */
const SLOW_TOKEN_MS = 1_000_000;
/** Attempts `quickly` makes before it gives up on a machine too loaded for a real-time check. */
const QUICK_ATTEMPTS = 5;

/**
 * The contract every `GlobalStore` fulfils: the same replies for the same calls. Run it on each
 * store (`MemoryStore`, `RedisStore` on one server and on a Cluster); `makeStore` is called once,
 * in `beforeAll`, and must give a store whose keys no other test touches (a fresh `MemoryStore`, a
 * `RedisStore` with a `uniquePrefix()`).
 *
 * The stores keep their own clocks (Redis's `TIME`), in real time, so a figure that depends on
 * elapsed time is checked against a window: the time the test measured around the calls since
 * the bucket was last exactly known bounds the time the store saw pass.
 *
 * @example
 * describeStoreContract('MemoryStore', () => new MemoryStore());
 */
export function describeStoreContract(
  name: string,
  makeStore: () => GlobalStore | Promise<GlobalStore>,
): void {
  describe(`GlobalStore contract: ${name}`, () => {
    let store: GlobalStore;
    let keys = 0;
    /** A key no other test of this suite uses. */
    const fresh = (label: string) => `${label}#${++keys}`;

    beforeAll(async () => {
      store = await makeStore();
    });

    it('admits a new key and leaves capacity − cost (capacity 100, 10/s, cost 1)', async () => {
      expect(await store.take(fresh('new'), [hundred], 1)).toEqual({
        allowed: true,
        remaining: 99,
        retryAfterMs: 0,
        resetMs: 100,
        limit: 100,
      });
    });

    it('peek reports a new key full, and takes nothing', async () => {
      const key = fresh('peek');
      expect(await store.peek(key, [hundred])).toEqual({ remaining: 100, resetMs: 0, limit: 100 });
      expect(await store.peek(key, [hundred])).toEqual({ remaining: 100, resetMs: 0, limit: 100 });
      const clock = stopwatch();
      expect((await store.take(key, [hundred], 1)).remaining).toBe(99);
      const peeked = await store.peek(key, [hundred]);
      expect(peeked.remaining).toBe(99);
      expectWindow(peeked.resetMs, 100, clock());
    });

    it('admits a cost that empties the bucket exactly, then denies the next token', async () => {
      const five = defineLimit({ capacity: 5, refillPerSecond: 10, name: 'five' });
      const { drained, denied, elapsed } = await quickly(80, async () => {
        const key = fresh('exact');
        return { drained: await store.take(key, [five], 5), denied: await store.take(key, [five], 1) };
      });
      expect(drained).toEqual({ allowed: true, remaining: 0, retryAfterMs: 0, resetMs: 500, limit: 5 });
      expect(denied).toMatchObject({ allowed: false, remaining: 0, limit: 5 });
      expectWindow(denied.retryAfterMs, 100, elapsed);
      expectWindow(denied.resetMs, 500, elapsed);
    });

    it('denies a drained bucket with retryAfterMs ≈ one token at the refill rate (100 ms)', async () => {
      const { drained, denied, elapsed } = await quickly(80, async () => {
        const key = fresh('drain');
        return {
          drained: await store.take(key, [hundred], 100),
          denied: await store.take(key, [hundred], 1),
        };
      });
      expect(drained).toMatchObject({ allowed: true, remaining: 0, resetMs: 10_000 });
      expect(denied).toMatchObject({ allowed: false, remaining: 0, limit: 100 });
      expect(denied.retryAfterMs).toBeGreaterThan(0);
      expectWindow(denied.retryAfterMs, 100, elapsed);
      expectWindow(denied.resetMs, 10_000, elapsed);
    });

    it('admits a request retried after exactly retryAfterMs', async () => {
      const fast = defineLimit({ capacity: 2, refillPerSecond: 5, name: 'fast' });
      const { key, denied } = await quickly(150, async () => {
        const key = fresh('retry');
        await store.take(key, [fast], 2);
        return { key, denied: await store.take(key, [fast], 1) };
      });
      expect(denied.allowed).toBe(false);
      // The store decided before its reply arrived: retryAfterMs from now is enough on any clock.
      await sleepUntil(performance.now() + denied.retryAfterMs);
      expect((await store.take(key, [fast], 1)).allowed).toBe(true);
    });

    it('denies a cost above what is left, takes nothing, and admits what is left', async () => {
      const key = fresh('partial');
      const clock = stopwatch();
      expect(await store.take(key, [slow], 7)).toMatchObject({ allowed: true, remaining: 3 });
      const denied = await store.take(key, [slow], 4);
      expect(denied).toMatchObject({ allowed: false, remaining: 3, limit: 10 });
      expectWindow(denied.retryAfterMs, SLOW_TOKEN_MS, clock());
      expect(await store.take(key, [slow], 3)).toMatchObject({ allowed: true, remaining: 0 });
    });

    it('refund gives tokens back and never past capacity', async () => {
      const key = fresh('refund');
      const clock = stopwatch();
      expect((await store.take(key, [slow], 3)).remaining).toBe(7);
      const refunded = await store.refund(key, [slow], 2);
      expect(refunded).toMatchObject({ remaining: 9, limit: 10 });
      expectWindow(refunded.resetMs, SLOW_TOKEN_MS, clock());
      expect(await store.refund(key, [slow], 5)).toEqual({ remaining: 10, resetMs: 0, limit: 10 });
      expect(await store.peek(key, [slow])).toEqual({ remaining: 10, resetMs: 0, limit: 10 });
    });

    it('refund on an unknown key leaves it full', async () => {
      expect(await store.refund(fresh('refund-new'), [slow], 3)).toEqual({
        remaining: 10,
        resetMs: 0,
        limit: 10,
      });
    });

    it('reserve grants up to want, then what is left, then nothing with the wait for min', async () => {
      const key = fresh('reserve');
      const clock = stopwatch();
      expect(await store.reserve(key, [slow], 4, 1)).toMatchObject({
        granted: 4,
        remaining: 6,
        retryAfterMs: 0,
        limit: 10,
      });
      expect(await store.reserve(key, [slow], 10, 1)).toMatchObject({
        granted: 6,
        remaining: 0,
        retryAfterMs: 0,
      });
      const none = await store.reserve(key, [slow], 5, 1);
      const elapsed = clock();
      expect(none).toMatchObject({ granted: 0, remaining: 0, limit: 10 });
      expectWindow(none.retryAfterMs, SLOW_TOKEN_MS, elapsed);
      expectWindow(none.resetMs, 10 * SLOW_TOKEN_MS, elapsed);
    });

    it('reserve grants nothing below min, and says when min tokens will be there', async () => {
      const key = fresh('reserve-min');
      const clock = stopwatch();
      expect((await store.take(key, [slow], 8)).remaining).toBe(2);
      const none = await store.reserve(key, [slow], 8, 3);
      expect(none).toMatchObject({ granted: 0, remaining: 2, limit: 10 });
      expectWindow(none.retryAfterMs, SLOW_TOKEN_MS, clock());
      expect(await store.reserve(key, [slow], 8, 2)).toMatchObject({
        granted: 2,
        remaining: 0,
        retryAfterMs: 0,
      });
    });

    it('takes from several limits all or nothing, and reports the tightest', async () => {
      const wide = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'wide' });
      const narrow = defineLimit({ capacity: 3, refillPerSecond: 0.001, name: 'narrow' });
      const key = fresh('multi');
      const clock = stopwatch();
      for (const remaining of [2, 1, 0]) {
        expect(await store.take(key, [wide, narrow], 1)).toMatchObject({
          allowed: true,
          remaining,
          limit: 3,
        });
      }
      const denied = await store.take(key, [wide, narrow], 1);
      expect(denied).toMatchObject({ allowed: false, remaining: 0, limit: 3 });
      expectWindow(denied.retryAfterMs, SLOW_TOKEN_MS, clock());
      expect((await store.peek(key, [wide])).remaining).toBe(7);
      expect(await store.peek(key, [narrow, wide])).toMatchObject({ remaining: 0, limit: 3 });
    });

    it('is denied by any limit of the list, and then takes from none', async () => {
      const wide = defineLimit({ capacity: 100, refillPerSecond: 0.001, name: 'wide' });
      const narrow = defineLimit({ capacity: 2, refillPerSecond: 0.001, name: 'narrow' });
      const key = fresh('multi-later');
      expect(await store.take(key, [wide, narrow], 2)).toMatchObject({
        allowed: true,
        remaining: 0,
        limit: 2,
      });
      expect(await store.take(key, [wide, narrow], 1)).toMatchObject({
        allowed: false,
        remaining: 0,
        limit: 2,
      });
      expect(await store.peek(key, [wide])).toMatchObject({ remaining: 98, limit: 100 });
    });

    it('reports the first of the tightest limits on a tie', async () => {
      const big = defineLimit({ capacity: 20, refillPerSecond: 0.001, name: 'big' });
      const small = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'small' });
      const key = fresh('tie');
      await store.take(key, [big], 10); // big: 10 left, small: 10 (full)
      expect(await store.peek(key, [big, small])).toMatchObject({ remaining: 10, limit: 20 });
      expect(await store.peek(key, [small, big])).toMatchObject({ remaining: 10, limit: 10 });
      expect(await store.take(key, [small, big], 1)).toMatchObject({ remaining: 9, limit: 10 });
    });

    it('waits for every limit: retryAfterMs and resetMs of the slowest', async () => {
      const quick = defineLimit({ capacity: 1, refillPerSecond: 10, name: 'quick' });
      const sluggish = defineLimit({ capacity: 1, refillPerSecond: 1, name: 'sluggish' });
      const { first, denied, elapsed } = await quickly(800, async () => {
        const key = fresh('slowest');
        return {
          first: await store.take(key, [quick, sluggish], 1),
          denied: await store.take(key, [quick, sluggish], 1),
        };
      });
      expect(first).toMatchObject({ allowed: true, remaining: 0, resetMs: 1000 });
      expect(denied).toMatchObject({ allowed: false, remaining: 0, limit: 1 });
      expectWindow(denied.retryAfterMs, 1000, elapsed);
      expectWindow(denied.resetMs, 1000, elapsed);

      const tenFast = defineLimit({ capacity: 10, refillPerSecond: 10, name: 'ten-fast' });
      const tenSlow = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'ten-slow' });
      expect(await store.take(fresh('reset'), [tenFast, tenSlow], 5)).toEqual({
        allowed: true,
        remaining: 5,
        retryAfterMs: 0,
        resetMs: 5000,
        limit: 10,
      });
    });

    it('keeps keys, and limit names within a key, apart', async () => {
      const three = defineLimit({ capacity: 3, refillPerSecond: 0.001, name: 'three' });
      const other = defineLimit({ capacity: 3, refillPerSecond: 0.001, name: 'other' });
      const key = fresh('apart');
      expect((await store.take(key, [three], 3)).remaining).toBe(0);
      for (const neighbour of [`${key} `, `${key}:three`, `{${key}}`, key.toUpperCase(), `${key}%`]) {
        expect((await store.take(neighbour, [three], 1)).remaining).toBe(2);
      }
      expect((await store.take(key, [other], 1)).remaining).toBe(2);
    });

    it('takes any string as a key, each its own bucket', async () => {
      const three = defineLimit({ capacity: 3, refillPerSecond: 0.001, name: 'three' });
      const base = fresh('any');
      const odd = ['', '{', '}', ':', '%', '%25', 'a:b', '{user}}', '\u0000', '\n', '😀', '\ud800', '\udc00'];
      const keys = [...odd.map((k) => base + k), 'x'.repeat(10_000) + base, `${'y'.repeat(10_000)}{${base}`];
      for (const key of keys) expect((await store.take(key, [three], 1)).remaining).toBe(2);
      for (const key of keys) expect((await store.take(key, [three], 1)).remaining).toBe(1);
    });

    it('admits exactly the tokens there are to concurrent calls', async () => {
      const key = fresh('concurrent');
      const replies = await Promise.all(Array.from({ length: 25 }, () => store.take(key, [slow], 1)));
      const denied = replies.filter((r) => !r.allowed);
      expect(replies.filter((r) => r.allowed)).toHaveLength(10);
      expect(denied.every((r) => r.remaining === 0 && r.retryAfterMs > 0)).toBe(true);
    });

    it('times the next token of a fractional rate (100 per minute: 600 ms)', async () => {
      const minute = perMinute(100);
      const { drained, denied, elapsed } = await quickly(500, async () => {
        const key = fresh('fraction');
        return { drained: await store.take(key, [minute], 100), denied: await store.take(key, [minute], 1) };
      });
      expect(drained).toMatchObject({ allowed: true, remaining: 0, limit: 100 });
      expect(denied).toMatchObject({ allowed: false, remaining: 0 });
      expectWindow(drained.resetMs, 60_000, elapsed);
      expectWindow(denied.retryAfterMs, 600, elapsed);
    });

    it('stays exact at the largest capacity (1e9)', async () => {
      const huge = defineLimit({ capacity: 1_000_000_000, refillPerSecond: 0.001, name: 'huge' });
      const key = fresh('huge');
      expect(await store.take(key, [huge], 999_999_999)).toEqual({
        allowed: true,
        remaining: 1,
        retryAfterMs: 0,
        resetMs: 999_999_999_000_000,
        limit: 1_000_000_000,
      });
      expect(await store.take(key, [huge], 2)).toMatchObject({ allowed: false, remaining: 1 });
      expect(await store.take(key, [huge], 1)).toMatchObject({ allowed: true, remaining: 0 });
    });
  });
}

/**
 * `actual` is a duration the store gave at most `elapsed` ms after a moment when it was exactly
 * `atStart`: it can only have shrunk since, and by no more than `elapsed`.
 */
function expectWindow(actual: number, atStart: number, elapsed: number): void {
  expect(Number.isInteger(actual)).toBe(true);
  expect(actual).toBeLessThanOrEqual(atStart);
  expect(actual).toBeGreaterThanOrEqual(atStart - elapsed);
}

/**
 * Runs `scenario` (which must use fresh keys) until one run takes at most `budgetMs`, at most
 * `QUICK_ATTEMPTS` times, and returns that run with the ms it took (as `stopwatch` counts). A
 * check that a bucket has not refilled yet only holds if the calls came closer together than a
 * token takes, and a loaded machine can stall a test between two calls.
 */
async function quickly<T extends object>(
  budgetMs: number,
  scenario: () => Promise<T>,
): Promise<T & { elapsed: number }> {
  let slowest = 0;
  for (let attempt = 0; attempt < QUICK_ATTEMPTS; attempt++) {
    const clock = stopwatch();
    const result = await scenario();
    const elapsed = clock();
    if (elapsed <= budgetMs) return { ...result, elapsed };
    slowest = Math.max(slowest, elapsed);
  }
  throw new Error(`no run within ${budgetMs} ms in ${QUICK_ATTEMPTS} attempts (slowest: ${slowest} ms)`);
}
