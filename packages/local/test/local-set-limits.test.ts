import { defineLimit, perMinute, perSecond } from '@tiered-limiter/core';
import { LocalLimiter, MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';

function admitted(limiter: LocalLimiter, key: string, tries: number): number {
  let n = 0;
  for (let i = 0; i < tries; i++) if (limiter.tryConsume(key).allowed) n++;
  return n;
}

describe('LocalLimiter.setLimits', () => {
  it('a raised capacity fills a full bucket to it, whether or not a peek dropped the key first', async () => {
    const clock = new FakeClock(1_000);
    const limiter = new LocalLimiter({ limits: perSecond(10, { name: 'api' }), clock });
    limiter.tryConsume('peeked');
    limiter.tryConsume('idle');
    clock.advance(10_000); // both full again
    // A peek forgets a key it finds full; `idle` stays in the table, as full.
    await limiter.peek('peeked');
    limiter.setLimits(perSecond(10, { burst: 20, name: 'api' }));
    // Before: 20 for the peeked key and 10 for the other, half the burst of a key never seen.
    expect([
      admitted(limiter, 'peeked', 30),
      admitted(limiter, 'idle', 30),
      admitted(limiter, 'new', 30),
    ]).toEqual([20, 20, 20]);
  });

  it('as the store-backed limiters do', async () => {
    const clock = new FakeClock(1_000);
    const limiter = new RequestLimiter({
      store: new MemoryStore({ clock }),
      limits: perSecond(10, { name: 'api' }),
      failurePolicy: 'closed',
      clock,
    });
    await limiter.consume('idle');
    clock.advance(10_000);
    limiter.setLimits(perSecond(10, { burst: 20, name: 'api' }));
    let n = 0;
    for (let i = 0; i < 30; i++) if ((await limiter.consume('idle')).allowed) n++;
    expect(n).toBe(20);
  });

  it('per limit: a full bucket fills to its raised capacity, one still refilling keeps its tokens', () => {
    const clock = new FakeClock(1_000);
    const second = perSecond(10, { name: 'second' });
    const minute = perMinute(30, { name: 'minute' });
    const limiter = new LocalLimiter({ limits: [second, minute], clock });
    expect(admitted(limiter, 'k', 10)).toBe(10);
    clock.advance(1_000); // `second` full again; `minute` at 20.5 of 30
    limiter.setLimits([
      perSecond(10, { burst: 40, name: 'second' }),
      perMinute(30, { burst: 60, name: 'minute' }),
    ]);
    // `minute` binds with the 20 whole tokens it kept, not its new 60; `second` has 40 (before: 10).
    expect(admitted(limiter, 'k', 50)).toBe(20);
    const seconds = new LocalLimiter({ limits: second, clock });
    seconds.tryConsume('k');
    clock.advance(1_000);
    seconds.setLimits(defineLimit({ capacity: 40, refillPerSecond: 10, name: 'second' }));
    expect(admitted(seconds, 'k', 50)).toBe(40);
  });

  it("keeps a penalty's debt whole under a lower capacity, as the stores do", async () => {
    const clock = new FakeClock(1_000);
    const local = new LocalLimiter({ limits: perSecond(10, { name: 'api' }), clock });
    const request = new RequestLimiter({
      store: new MemoryStore({ clock }),
      limits: perSecond(10, { name: 'api' }),
      failurePolicy: 'closed',
      clock,
    });
    for (const limiter of [local, request]) {
      await limiter.penalty('k', 10);
      await limiter.penalty('k', 10); // at most a capacity into debt: -10
      limiter.setLimits(perSecond(10, { burst: 5, name: 'api' }));
      await limiter.penalty('k', 1); // a debit never lifts a deeper debt
    }
    // 11 tokens at 10/s. Before: 600 ms here, the debt cut to the new capacity's 5.
    expect(local.tryConsume('k')).toMatchObject({ allowed: false, retryAfterMs: 1100 });
    expect(await request.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 1100 });
  });
});
