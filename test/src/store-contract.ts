import {
  ArgumentError,
  defineLimit,
  type GlobalStore,
  type LimitSpec,
  MAX_CAPACITY,
  MIN_REFILL_PER_SECOND,
  perMinute,
} from '@tiered-limiter/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { sleepAtLeast, sleepUntil, stopwatch } from './real-time.js';
import { describeStoreEdges } from './store-contract-edges.js';

/** 100 tokens, 10 per second: the example; one token every 100 ms. */
const hundred = defineLimit({ capacity: 100, refillPerSecond: 10, name: 'hundred' });
/** 10 tokens, one per 1,000 s: no refill worth a token during a test. */
const slow = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'slow' });
/** 1,000 s per token, in ms. */
const SLOW_TOKEN_MS = 1_000_000;
/** How long the store holds a lease in these tests: far longer than any test runs. */
const HOLD_MS = 600_000;
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
    const take = (key: string, limits: LimitSpec[], cost: number) => store.apply({ key, limits, take: cost });
    const peek = (key: string, limits: LimitSpec[]) => store.apply({ key, limits });
    const reserve = (key: string, limits: LimitSpec[], want: number, min: number, holdMs = HOLD_MS) =>
      store.apply({ key, limits, reserve: { want, min, holdMs } });
    const report = (key: string, limits: LimitSpec[], generation: number, spent: number, returned: number) =>
      store.apply({ key, limits, reports: [{ generation, spent, returned }] });

    beforeAll(async () => {
      store = await makeStore();
    });

    it('heartbeat counts the live instances and forgets one that stops beating', async () => {
      const heartbeat = store.heartbeat?.bind(store);
      expect(heartbeat).toBeDefined();
      const [a, b] = [fresh('instance-a'), fresh('instance-b')];
      const before = await heartbeat!(a, 60_000);
      // b's beat lasts 500 ms: long enough that a's next beat (a call away) sees it on a loaded
      // machine, short enough to wait out.
      expect(await heartbeat!(b, 500)).toBe(before + 1);
      expect(await heartbeat!(a, 60_000)).toBe(before + 1);
      await sleepUntil(performance.now() + 700);
      expect(await heartbeat!(a, 60_000)).toBe(before);
    });

    it('heartbeat: a short registration after a long one does not cut the long one short', async () => {
      const heartbeat = store.heartbeat!.bind(store);
      const [long, short, later] = [fresh('instance-long'), fresh('instance-short'), fresh('instance-later')];
      const before = await heartbeat(long, 60_000);
      expect(await heartbeat(short, 100)).toBe(before + 1);
      // Past the short one's registration and twice over: it is gone, the long one is not.
      await sleepUntil(performance.now() + 300);
      expect(await heartbeat(later, 60_000)).toBe(before + 1);
    });

    it('leave takes an instance out of the live count at once; the others stay', async () => {
      const heartbeat = store.heartbeat!.bind(store);
      const leave = store.leave?.bind(store);
      expect(leave).toBeDefined();
      const [staying, leaving] = [fresh('instance-staying'), fresh('instance-leaving')];
      const before = await heartbeat(staying, 60_000);
      expect(await heartbeat(leaving, 60_000)).toBe(before + 1);
      await leave!(leaving);
      expect(await heartbeat(staying, 60_000)).toBe(before);
      // Leaving twice, or never having come, changes nothing.
      await leave!(leaving);
      await leave!(fresh('instance-never'));
      expect(await heartbeat(staying, 60_000)).toBe(before);
    });

    it('refuses an op on no limit, or on a key that is not a string, by rejecting with an ArgumentError', async () => {
      const refusals: [() => Promise<unknown>, string, unknown][] = [
        [() => take(fresh('no-limit'), [], 1), 'limits', []],
        [() => peek(fresh('no-limit'), []), 'limits', []],
        [() => store.apply({ key: fresh('no-limit'), limits: undefined as never }), 'limits', undefined],
        [() => store.reset(fresh('no-limit'), []), 'limits', []],
        [() => take(42 as never, [slow], 1), 'key', 42],
        [() => store.reset(undefined as never, [slow]), 'key', undefined],
      ];
      for (const [call, argument, value] of refusals) {
        // Never a throw: a caller's `.catch`, or a `Promise.all` beside other ops, sees it as any failure.
        let pending: Promise<unknown> | undefined;
        expect(() => {
          pending = call();
        }).not.toThrow();
        const refused = await pending!.then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(refused).toBeInstanceOf(ArgumentError);
        expect(refused).toMatchObject({ code: 'ERR_TL_ARGUMENT', argument, value });
      }
      // Nothing of them reached a bucket: 42 is a key like any other, still full.
      expect(await peek('42', [slow])).toMatchObject({ remaining: 10 });
    });

    it('admits a new key and leaves capacity − cost (capacity 100, 10/s, cost 1)', async () => {
      expect(await take(fresh('new'), [hundred], 1)).toEqual({
        ok: true,
        granted: 1,
        generation: 0,
        remaining: 99,
        retryAfterMs: 0,
        resetMs: 100,
        limitIndex: 0,
      });
    });

    it('a peek reports a new key full, and takes nothing', async () => {
      const key = fresh('peek');
      const full = {
        ok: true,
        granted: 0,
        generation: 0,
        remaining: 100,
        retryAfterMs: 0,
        resetMs: 0,
        limitIndex: 0,
      };
      expect(await peek(key, [hundred])).toEqual(full);
      expect(await peek(key, [hundred])).toEqual(full);
      // A take and a peek within 80 ms (a token refills in 100): the peek sees what the take left.
      const { taken, peeked, elapsed } = await quickly(80, async () => {
        const other = fresh('peek-after-take');
        return { taken: await take(other, [hundred], 1), peeked: await peek(other, [hundred]) };
      });
      expect(taken.remaining).toBe(99);
      expect(peeked.remaining).toBe(99);
      expectWindow(peeked.resetMs, 100, elapsed);
    });

    it('admits a cost that empties the bucket exactly, then denies the next token', async () => {
      const five = defineLimit({ capacity: 5, refillPerSecond: 10, name: 'five' });
      const { drained, denied, elapsed } = await quickly(80, async () => {
        const key = fresh('exact');
        return { drained: await take(key, [five], 5), denied: await take(key, [five], 1) };
      });
      expect(drained).toEqual({
        ok: true,
        granted: 5,
        generation: 0,
        remaining: 0,
        retryAfterMs: 0,
        resetMs: 500,
        limitIndex: 0,
      });
      expect(denied).toMatchObject({ ok: false, granted: 0, remaining: 0, limitIndex: 0 });
      expectWindow(denied.retryAfterMs, 100, elapsed);
      expectWindow(denied.resetMs, 500, elapsed);
    });

    it('denies a drained bucket with retryAfterMs ≈ one token at the refill rate (100 ms)', async () => {
      const { drained, denied, elapsed } = await quickly(80, async () => {
        const key = fresh('drain');
        return { drained: await take(key, [hundred], 100), denied: await take(key, [hundred], 1) };
      });
      expect(drained).toMatchObject({ ok: true, remaining: 0, resetMs: 10_000 });
      expect(denied).toMatchObject({ ok: false, remaining: 0 });
      expect(denied.retryAfterMs).toBeGreaterThan(0);
      expectWindow(denied.retryAfterMs, 100, elapsed);
      expectWindow(denied.resetMs, 10_000, elapsed);
    });

    it('admits a request retried after exactly retryAfterMs', async () => {
      const fast = defineLimit({ capacity: 2, refillPerSecond: 5, name: 'fast' });
      const { key, denied } = await quickly(150, async () => {
        const key = fresh('retry');
        await take(key, [fast], 2);
        return { key, denied: await take(key, [fast], 1) };
      });
      expect(denied.ok).toBe(false);
      // The store decided before its reply arrived: retryAfterMs from now is enough on any clock.
      await sleepUntil(performance.now() + denied.retryAfterMs);
      expect((await take(key, [fast], 1)).ok).toBe(true);
    });

    it('denies a cost above what is left, takes nothing, and admits what is left', async () => {
      const key = fresh('partial');
      const clock = stopwatch();
      expect(await take(key, [slow], 7)).toMatchObject({ ok: true, remaining: 3 });
      const denied = await take(key, [slow], 4);
      expect(denied).toMatchObject({ ok: false, remaining: 3 });
      expectWindow(denied.retryAfterMs, SLOW_TOKEN_MS, clock());
      expect(await take(key, [slow], 3)).toMatchObject({ ok: true, remaining: 0 });
    });

    it('credit gives tokens back and never past capacity; on an unknown key it leaves it full', async () => {
      const key = fresh('credit');
      const clock = stopwatch();
      expect((await take(key, [slow], 3)).remaining).toBe(7);
      const credited = await store.apply({ key, limits: [slow], credit: 2 });
      expect(credited).toMatchObject({ ok: true, remaining: 9 });
      expectWindow(credited.resetMs, SLOW_TOKEN_MS, clock());
      expect(await store.apply({ key, limits: [slow], credit: 5 })).toMatchObject({
        remaining: 10,
        resetMs: 0,
      });
      expect(await peek(key, [slow])).toMatchObject({ remaining: 10, resetMs: 0 });
      expect(await store.apply({ key: fresh('credit-new'), limits: [slow], credit: 3 })).toMatchObject({
        remaining: 10,
        resetMs: 0,
      });
    });

    it('debit takes regardless, into debt at most a capacity deep, and says how long until a token', async () => {
      const key = fresh('debit');
      const clock = stopwatch();
      expect(await store.apply({ key, limits: [slow], debit: 4 })).toMatchObject({ ok: true, remaining: 6 });
      const debt = await store.apply({ key, limits: [slow], debit: 100 });
      expect(debt).toMatchObject({ ok: false, remaining: 0 });
      // 10 in debt: 11 tokens to wait for before one is there.
      expectWindow(debt.retryAfterMs, 11 * SLOW_TOKEN_MS, clock());
      expect(await take(key, [slow], 1)).toMatchObject({ ok: false });
    });

    it('debit never lifts a bucket already deeper in debt than a capacity (a take that borrowed ahead)', async () => {
      const key = fresh('debit-deep');
      // 10 a second, capacity 10: four takes of 10, each borrowing 3 s of refill, leave 30 in debt.
      const fast = defineLimit({ capacity: 10, refillPerSecond: 10, name: 'fast' });
      for (let i = 0; i < 4; i++) {
        expect(await store.apply({ key, limits: [fast], take: 10, aheadMs: 3000 })).toMatchObject({
          ok: true,
        });
      }
      const clock = stopwatch();
      const before = await peek(key, [fast]);
      // 31 tokens to wait for, at 100 ms each: 3.1 s, less what refilled since the takes.
      expect(before.retryAfterMs).toBeGreaterThan(2500);
      const after = await store.apply({ key, limits: [fast], debit: 1 });
      // A debit that lifted the debt to a capacity (10) would leave 1.1 s to wait.
      expect(after.retryAfterMs).toBeGreaterThanOrEqual(before.retryAfterMs - clock() - 1);
    });

    it('a wait longer than 2^52 ms is capped there, alike on every store and client', async () => {
      // The largest capacity at the slowest rate: refilling it all takes 10^18 ms.
      const vast = defineLimit({
        capacity: MAX_CAPACITY,
        refillPerSecond: MIN_REFILL_PER_SECOND,
        name: 'vast',
      });
      const drained = await take(fresh('vast'), [vast], MAX_CAPACITY);
      expect(drained).toMatchObject({ ok: true, remaining: 0, resetMs: 2 ** 52 });
    });

    it('reserve grants up to want, then what is left, then nothing with the wait for min', async () => {
      const key = fresh('reserve');
      const first = await reserve(key, [slow], 4, 1);
      expect(first).toMatchObject({ ok: true, granted: 4, remaining: 6, retryAfterMs: 0, limitIndex: 0 });
      expect(first.generation).toBeGreaterThan(0);
      expect(await reserve(key, [slow], 10, 1)).toMatchObject({ granted: 6, remaining: 0, retryAfterMs: 0 });
      const none = await reserve(key, [slow], 5, 1);
      expect(none).toMatchObject({ ok: false, granted: 0, generation: 0, remaining: 0 });
      // Nothing refills while the leases hold the whole bucket: the wait runs past their release.
      expect(none.retryAfterMs).toBeGreaterThan(SLOW_TOKEN_MS);
    });

    it('reserve grants nothing below min, and says when min tokens will be there', async () => {
      const key = fresh('reserve-min');
      const clock = stopwatch();
      expect((await take(key, [slow], 8)).remaining).toBe(2);
      const none = await reserve(key, [slow], 8, 3);
      expect(none).toMatchObject({ granted: 0, remaining: 2 });
      expectWindow(none.retryAfterMs, SLOW_TOKEN_MS, clock());
      expect(await reserve(key, [slow], 8, 2)).toMatchObject({ granted: 2, remaining: 0, retryAfterMs: 0 });
    });

    it('holds leased tokens against the room: the bucket does not refill behind a lease', async () => {
      const key = fresh('room');
      const lease = await reserve(key, [hundred], 100, 1);
      expect(lease.granted).toBe(100);
      await sleepUntil(performance.now() + 300);
      // 300 ms at 10/s would be 3 tokens in a bucket without leases; the lease holds the room.
      expect((await peek(key, [hundred])).remaining).toBe(0);
      // Spends free their room, hand-backs come back: 40 spent, 60 returned.
      const settled = await report(key, [hundred], lease.generation, 40, 60);
      expect(settled.remaining).toBe(60);
      await sleepUntil(performance.now() + 250);
      expect((await peek(key, [hundred])).remaining).toBeGreaterThanOrEqual(62);
    });

    it('takes a hand-back before its generation is released, and adds nothing after', async () => {
      const kept = fresh('handback');
      const late = fresh('handback-late');
      const early = await reserve(kept, [slow], 10, 1, 60_000);
      expect(await report(kept, [slow], early.generation, 0, 10)).toMatchObject({ remaining: 10 });
      const gone = await reserve(late, [slow], 10, 1, 100);
      await sleepUntil(performance.now() + 250);
      // Released as spent at 100 ms (rounded up to 4 ms): the bucket stays empty, the late
      // hand-back cannot put its tokens back.
      expect(await report(late, [slow], gone.generation, 0, 10)).toMatchObject({ remaining: 0 });
    });

    it('never credits into the room a lease holds', async () => {
      const key = fresh('credit-room');
      await reserve(key, [slow], 6, 1);
      expect(await store.apply({ key, limits: [slow], credit: 100 })).toMatchObject({ remaining: 4 });
    });

    it('reset forgets a key and what is on lease from it: full again', async () => {
      const key = fresh('reset');
      await reserve(key, [slow], 6, 1);
      await take(key, [slow], 3);
      await store.reset(key, [slow]);
      expect(await peek(key, [slow])).toMatchObject({ remaining: 10, resetMs: 0 });
    });

    it('reset fences the leases before it: their reports change nothing, even beside a lease made after it', async () => {
      const key = fresh('reset-fence');
      const before = await reserve(key, [slow], 5, 5);
      await store.reset(key, [slow]);
      const after = await reserve(key, [slow], 10, 10);
      expect(after).toMatchObject({ granted: 10, remaining: 0 });
      expect(after.generation).not.toBe(before.generation);
      // The old lease hands its 5 back, then reports them spent: the new lease keeps all 10.
      await report(key, [slow], before.generation, 0, 5);
      await report(key, [slow], before.generation, 5, 0);
      expect(await take(key, [slow], 1)).toMatchObject({ ok: false, remaining: 0 });
      // The new lease's own hand-back is counted.
      expect(await report(key, [slow], after.generation, 0, 10)).toMatchObject({ remaining: 10 });
    });

    it('reset comes after the ops asked before it and before those asked after it, even unsent', async () => {
      const key = fresh('reset-order');
      const before = take(key, [slow], 5);
      const reset = store.reset(key, [slow]);
      const after = take(key, [slow], 2);
      await Promise.all([before, reset, after]);
      expect(await before).toMatchObject({ ok: true, remaining: 5 });
      expect(await after).toMatchObject({ ok: true, remaining: 8 });
      expect(await peek(key, [slow])).toMatchObject({ remaining: 8 });
    });

    it('takes from several limits all or nothing, and speaks of the one with fewest tokens', async () => {
      const wide = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'wide' });
      const narrow = defineLimit({ capacity: 3, refillPerSecond: 0.001, name: 'narrow' });
      const key = fresh('multi');
      const clock = stopwatch();
      for (const remaining of [2, 1, 0]) {
        expect(await take(key, [wide, narrow], 1)).toMatchObject({ ok: true, remaining, limitIndex: 1 });
      }
      const denied = await take(key, [wide, narrow], 1);
      expect(denied).toMatchObject({ ok: false, remaining: 0, limitIndex: 1 });
      expectWindow(denied.retryAfterMs, SLOW_TOKEN_MS, clock());
      expect((await peek(key, [wide])).remaining).toBe(7);
      expect(await peek(key, [narrow, wide])).toMatchObject({ remaining: 0, limitIndex: 0 });
    });

    it('is denied by any limit of the list, and then takes from none', async () => {
      const wide = defineLimit({ capacity: 100, refillPerSecond: 0.001, name: 'wide' });
      const narrow = defineLimit({ capacity: 2, refillPerSecond: 0.001, name: 'narrow' });
      const key = fresh('multi-later');
      expect(await take(key, [wide, narrow], 2)).toMatchObject({ ok: true, remaining: 0, limitIndex: 1 });
      expect(await take(key, [wide, narrow], 1)).toMatchObject({ ok: false, remaining: 0, limitIndex: 1 });
      expect((await peek(key, [wide])).remaining).toBe(98);
    });

    it('on a tie of tokens, speaks of the limit slowest to fill', async () => {
      const big = defineLimit({ capacity: 20, refillPerSecond: 0.001, name: 'big' });
      const small = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'small' });
      const key = fresh('tie');
      await take(key, [big], 10); // big: 10 left (10,000 s from full), small: 10 (full)
      expect(await peek(key, [big, small])).toMatchObject({ remaining: 10, limitIndex: 0 });
      expect(await peek(key, [small, big])).toMatchObject({ remaining: 10, limitIndex: 1 });
      expect(await take(key, [small, big], 1)).toMatchObject({ remaining: 9, limitIndex: 1 });
    });

    it('waits for every limit: the reply speaks of the slowest, its wait and its reset', async () => {
      const quick = defineLimit({ capacity: 1, refillPerSecond: 10, name: 'quick' });
      const sluggish = defineLimit({ capacity: 1, refillPerSecond: 1, name: 'sluggish' });
      const { first, denied, elapsed } = await quickly(800, async () => {
        const key = fresh('slowest');
        return {
          first: await take(key, [quick, sluggish], 1),
          denied: await take(key, [quick, sluggish], 1),
        };
      });
      expect(first).toMatchObject({ ok: true, remaining: 0, resetMs: 1000, limitIndex: 1 });
      expect(denied).toMatchObject({ ok: false, remaining: 0, limitIndex: 1 });
      expectWindow(denied.retryAfterMs, 1000, elapsed);
      expectWindow(denied.resetMs, 1000, elapsed);

      const tenFast = defineLimit({ capacity: 10, refillPerSecond: 10, name: 'ten-fast' });
      const tenSlow = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'ten-slow' });
      expect(await take(fresh('reset'), [tenFast, tenSlow], 5)).toEqual({
        ok: true,
        granted: 5,
        generation: 0,
        remaining: 5,
        retryAfterMs: 0,
        resetMs: 5000,
        limitIndex: 1,
      });
    });

    it('keeps keys, and limit names within a key, apart', async () => {
      const three = defineLimit({ capacity: 3, refillPerSecond: 0.001, name: 'three' });
      const other = defineLimit({ capacity: 3, refillPerSecond: 0.001, name: 'other' });
      const key = fresh('apart');
      expect((await take(key, [three], 3)).remaining).toBe(0);
      for (const neighbour of [`${key} `, `${key}:three`, `{${key}}`, key.toUpperCase(), `${key}%`]) {
        expect((await take(neighbour, [three], 1)).remaining).toBe(2);
      }
      expect((await take(key, [other], 1)).remaining).toBe(2);
    });

    it('takes any string as a key, each its own bucket', async () => {
      const three = defineLimit({ capacity: 3, refillPerSecond: 0.001, name: 'three' });
      const base = fresh('any');
      const odd = ['', '{', '}', ':', '%', '%25', 'a:b', '{user}}', '\u0000', '\n', '😀', '\ud800', '\udc00'];
      const keys = [...odd.map((k) => base + k), 'x'.repeat(10_000) + base, `${'y'.repeat(10_000)}{${base}`];
      for (const key of keys) expect((await take(key, [three], 1)).remaining).toBe(2);
      for (const key of keys) expect((await take(key, [three], 1)).remaining).toBe(1);
    });

    it('admits exactly the tokens there are to concurrent ops, however they are batched', async () => {
      const key = fresh('concurrent');
      const replies = await Promise.all(Array.from({ length: 25 }, () => take(key, [slow], 1)));
      const denied = replies.filter((r) => !r.ok);
      expect(replies.filter((r) => r.ok)).toHaveLength(10);
      expect(denied.every((r) => r.remaining === 0 && r.retryAfterMs > 0)).toBe(true);
      // Ops on many keys at once: each key its own answer.
      const many = await Promise.all(
        Array.from({ length: 200 }, (_, i) => take(`${key}/${i % 50}`, [slow], 3)),
      );
      expect(many.map((r) => r.remaining)).toEqual(
        Array.from({ length: 200 }, (_, i) => (i < 150 ? 7 - 3 * Math.floor(i / 50) : 1)),
      );
    });

    it('times the next token of a fractional rate (100 per minute: 600 ms)', async () => {
      const minute = perMinute(100);
      const { drained, denied, elapsed } = await quickly(500, async () => {
        const key = fresh('fraction');
        return { drained: await take(key, [minute], 100), denied: await take(key, [minute], 1) };
      });
      expect(drained).toMatchObject({ ok: true, remaining: 0 });
      expect(denied).toMatchObject({ ok: false, remaining: 0 });
      expectWindow(drained.resetMs, 60_000, elapsed);
      expectWindow(denied.retryAfterMs, 600, elapsed);
    });

    it('stays exact at the largest capacity (1e9)', async () => {
      const huge = defineLimit({ capacity: 1_000_000_000, refillPerSecond: 0.001, name: 'huge' });
      const key = fresh('huge');
      expect(await take(key, [huge], 999_999_999)).toEqual({
        ok: true,
        granted: 999_999_999,
        generation: 0,
        remaining: 1,
        retryAfterMs: 0,
        resetMs: 999_999_999_000_000,
        limitIndex: 0,
      });
      expect(await take(key, [huge], 2)).toMatchObject({ ok: false, remaining: 1 });
      expect(await take(key, [huge], 1)).toMatchObject({ ok: true, remaining: 0 });
    });

    // `setLimits` changes a key's limit under the same name: the bucket it made stays, and the next
    // op's limits settle it (docs/ACCURACY.md), as bucket.lua does on Redis.
    it('a lowered rate refills the gap since the last op at the new rate', async () => {
      const quick = defineLimit({ capacity: 100, refillPerSecond: 1_000, name: 'changed' });
      const crawl = defineLimit({ capacity: 100, refillPerSecond: 0.001, name: 'changed' });
      const key = fresh('lowered-rate');
      expect(await take(key, [quick], 100)).toMatchObject({ ok: true, remaining: 0 });
      // 30 ms at 1,000/s would be 30 tokens; at the new rate it is 0.00003.
      await sleepAtLeast(30);
      for (let i = 0; i < 4; i++) await take(fresh('lowered-rate-other'), [quick], 1);
      expect(await take(key, [crawl], 1)).toMatchObject({ ok: false, remaining: 0 });
    });

    it('a lowered capacity cuts what the bucket holds, and the cut stays when it is raised again', async () => {
      const ten = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'changed' });
      const five = defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'changed' });
      const key = fresh('lowered-capacity');
      expect(await take(key, [ten], 2)).toMatchObject({ ok: true, remaining: 8 });
      expect(await take(key, [five], 1)).toMatchObject({ ok: true, remaining: 4 });
      expect(await take(key, [ten], 1)).toMatchObject({ ok: true, remaining: 3 });
    });

    it('a raised capacity refills from what the bucket held, not from full', async () => {
      const five = defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'changed' });
      const ten = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'changed' });
      const key = fresh('raised-capacity');
      expect(await take(key, [five], 2)).toMatchObject({ ok: true, remaining: 3 });
      expect(await take(key, [ten], 1)).toMatchObject({ ok: true, remaining: 2 });
    });

    describeStoreEdges(() => store, fresh, quickly);
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
