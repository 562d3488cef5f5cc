import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';
import { CountingStore, fakeTime, limiter } from './sync-kit.js';

// Leases for weighted traffic (docs/DECISIONS.md, "Weighted decisions"): the periodic sync sizes a
// key's lease in requests of the key's mean cost, not in single tokens.

const LIMIT = defineLimit({ capacity: 1000, refillPerSecond: 1000 });

/** Requests of `cost` on key `k` every `everyMs` for 10 s, on one instance with the sync: what the store was sent. */
async function drive(cost: number, everyMs: number) {
  const { clock, advance } = fakeTime();
  const store = new CountingStore(new MemoryStore({ clock }));
  const l = limiter(store, clock, { limits: LIMIT, instances: 1 });
  let requests = 0;
  let hot = 0;
  for (let ms = 0; ms < 10_000; ms += everyMs) {
    requests++;
    let d = l.tryConsume('k', cost);
    if (d !== undefined) hot++;
    else d = await l.consume('k', cost);
    expect(d.allowed).toBe(true);
    await advance(everyMs);
  }
  return { requests, hot, ops: store.ops.filter((op) => op.key === 'k'), stats: l.stats() };
}

describe('TieredLimiter leases for weighted requests', () => {
  it.each([
    [1, 1000],
    [10, 1000],
  ])(
    'a key asked at a cost of %i every %i ms (too sparse to lease) costs one op a request, with no lease it cannot spend',
    async (cost, everyMs) => {
      const { requests, ops } = await drive(cost, everyMs);
      // Before: a cost of 10 once a second cost 19 ops for 10 requests: the sync leased the key 4
      // tokens at a time (sized as if each token were a request), which no request of 10 could spend.
      expect(ops).toHaveLength(requests);
      for (const op of ops) expect(op.take ?? op.reserve?.want).toBeGreaterThanOrEqual(cost);
    },
  );

  it('a busy key asked at a cost of 10 is leased whole requests, and its lease answers them', async () => {
    const { requests, hot, ops } = await drive(10, 100);
    const leases = ops.flatMap((op) =>
      op.reserve === undefined || op.background !== true ? [] : [op.reserve.want],
    );
    expect(leases.length).toBeGreaterThan(0);
    // Sized as for requests of cost 1 at ten a second (needed(0.7) = 4 requests), times 10.
    expect(Math.min(...leases)).toBeGreaterThanOrEqual(10);
    expect(hot).toBeGreaterThanOrEqual(requests - 2);
  });
});
