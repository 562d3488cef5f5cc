import { ArgumentError, type BucketOp, defineLimit, type GlobalStore } from '@tiered-limiter/core';
import { expect, it } from 'vitest';
import { sleepAtLeast } from './real-time.js';

/** 10 tokens, one per 1,000 s: no refill worth a token during a test. */
const slow = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'slow' });
/** How long the store holds a lease in these tests: far longer than any test runs. */
const HOLD_MS = 600_000;

/**
 * The contract's cases at the edges of what an op may carry (part of `describeStoreContract`, whose
 * store, fresh keys and `quickly` they take): numbers that are not finite, takes of no tokens, and
 * ops that change nothing before a limit changes under its name.
 */
export function describeStoreEdges(
  storeOf: () => GlobalStore,
  fresh: (label: string) => string,
  quickly: <T extends object>(
    budgetMs: number,
    scenario: () => Promise<T>,
  ) => Promise<T & { elapsed: number }>,
): void {
  const apply = (key: string, fields: Omit<BucketOp, 'key' | 'limits'>, limits = [slow]) =>
    storeOf().apply({ key, limits, ...fields });

  it('refuses an op with a number that is not finite, sending nothing and changing no bucket', async () => {
    const key = fresh('not-finite');
    const lease = await apply(key, { reserve: { want: 3, min: 1, holdMs: HOLD_MS } });
    expect(lease).toMatchObject({ ok: true, granted: 3, remaining: 7 });
    const { generation } = lease;
    // NaN and Infinity reach apply.lua as JSON that its cjson reads: a lease held Infinity ms
    // looped there for ever, Redis answering every client BUSY.
    const refusals: [Omit<BucketOp, 'key' | 'limits'>, string][] = [
      [{ reports: [{ generation, spent: 0, returned: Number.NaN }] }, 'reports'],
      [{ reports: [{ generation: Number.NaN, spent: 1, returned: 2 }] }, 'reports'],
      [{ take: Number.POSITIVE_INFINITY }, 'take'],
      [{ take: Number.NaN }, 'take'],
      [{ credit: Number.POSITIVE_INFINITY }, 'credit'],
      [{ debit: Number.NaN }, 'debit'],
      [{ take: 1, aheadMs: Number.POSITIVE_INFINITY }, 'aheadMs'],
      [{ reserve: { want: 2, min: 1, holdMs: Number.POSITIVE_INFINITY } }, 'reserve'],
      [{ reserve: { want: Number.NaN, min: 1, holdMs: HOLD_MS } }, 'reserve'],
      // Finite, but past every wait a store replies: a TTL Redis refuses failed the whole call.
      [{ reserve: { want: 2, min: 1, holdMs: 1e300 } }, 'reserve'],
    ];
    for (const [fields, argument] of refusals) {
      const refused = await apply(key, fields).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(ArgumentError);
      expect(refused).toMatchObject({ code: 'ERR_TL_ARGUMENT', argument });
    }
    // The lease is still out and the bucket as the lease left it.
    expect(await apply(key, {})).toMatchObject({ remaining: 7 });
    expect(await apply(key, { reports: [{ generation, spent: 0, returned: 3 }] })).toMatchObject({
      remaining: 10,
    });
  });

  it('a take of 0 or less is a peek: it takes nothing and gives nothing', async () => {
    const key = fresh('no-take');
    expect(await apply(key, { take: 0 })).toMatchObject({
      ok: true,
      granted: 0,
      remaining: 10,
      retryAfterMs: 0,
    });
    expect(await apply(key, { take: -1 })).toMatchObject({ ok: true, granted: 0, remaining: 10 });
    expect(await apply(key, { take: 10 })).toMatchObject({ ok: true, remaining: 0 });
    expect(await apply(key, { take: -3 })).toMatchObject({ ok: false, granted: 0, remaining: 0 });
    const lease = await apply(key, { reserve: { want: 0, min: 0, holdMs: HOLD_MS } });
    expect(lease).toMatchObject({ ok: false, granted: 0, generation: 0, remaining: 0 });
  });

  it('a lowered rate refills the gap at the new rate though a peek and a refusal of the key came between', async () => {
    // A thousand tokens a second, a second to fill: the looks find 30 tokens or more, never a full bucket.
    const quick = defineLimit({ capacity: 1_000, refillPerSecond: 1_000, name: 'changed' });
    const crawl = defineLimit({ capacity: 1_000, refillPerSecond: 0.001, name: 'changed' });
    const { drained, peeked, refused, after } = await quickly(800, async () => {
      const key = fresh('lowered-rate-looked');
      const drained = await apply(key, { take: 1_000 }, [quick]);
      await sleepAtLeast(30);
      const peeked = await apply(key, {}, [quick]);
      const refused = await apply(key, { take: 1_000 }, [quick]);
      return { drained, peeked, refused, after: await apply(key, { take: 1 }, [crawl]) };
    });
    expect(drained).toMatchObject({ ok: true, remaining: 0 });
    expect(peeked).toMatchObject({ ok: true });
    expect(refused).toMatchObject({ ok: false });
    // The looks changed no bucket: the gap since the take refills at the new rate, far short of a token.
    expect(after).toMatchObject({ ok: false, remaining: 0 });
  });
}
