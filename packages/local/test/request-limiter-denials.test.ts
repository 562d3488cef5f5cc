import { defineLimit, type LimitSpec, perSecond } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { LateReplies } from './late-replies.js';

function setup(limits: LimitSpec) {
  const clock = new FakeClock(1_000);
  const store = new LateReplies(clock);
  const limiter = new RequestLimiter({
    store,
    limits,
    failurePolicy: 'closed',
    clock,
    rememberDenials: true,
  });
  return { clock, store, limiter };
}

describe('RequestLimiter.rememberDenials: a denial kept no longer than the store would deny', () => {
  it('counts its wait from when the op was asked for, not from when its reply was read', async () => {
    const { clock, store, limiter } = setup(perSecond(10));
    for (let i = 0; i < 10; i++) await limiter.consume('k');
    store.lagMs = 15;
    // The store turned the key away for 100 ms; the reply came 15 ms later.
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 100, tier: 'global' });
    store.lagMs = 0;
    clock.advance(50);
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 35, tier: 'local' });
    clock.advance(35);
    // 100 ms after the store's denial: its token is there. Before: turned away here for 15 ms more.
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
  });

  it('keeps no denial of limits that setLimits replaced while its reply travelled', async () => {
    const { clock, store, limiter } = setup(
      defineLimit({ capacity: 1, refillPerSecond: 0.001, name: 'api' }),
    );
    await limiter.consume('k');
    store.hold = true;
    const pending = limiter.consume('k');
    limiter.setLimits(defineLimit({ capacity: 100, refillPerSecond: 100, name: 'api' }));
    store.release();
    expect(await pending).toMatchObject({ allowed: false, retryAfterMs: 1_000_000 });
    clock.advance(20);
    // Two tokens at 100/s. Before: the old limit's 1,000 s, in process.
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
  });

  it('answers a cost above 1 from the store: the wait kept is for one token', async () => {
    const { limiter } = setup(defineLimit({ capacity: 2, refillPerSecond: 0.5, name: 'api' }));
    await limiter.consume('k', 2);
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 2000, tier: 'global' });
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 2000, tier: 'local' });
    // Before: 2 s, from process; the second token comes 2 s after the first.
    expect(await limiter.consume('k', 2)).toMatchObject({
      allowed: false,
      retryAfterMs: 4000,
      tier: 'global',
    });
  });

  it('forgets the denial on a penalty, whose wait is longer', async () => {
    const { clock, limiter } = setup(perSecond(1));
    await limiter.consume('k');
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 1000, tier: 'global' });
    expect(await limiter.penalty('k', 1)).toBe(true);
    clock.advance(500);
    // Before: 500 ms, from process, and turned away again at its end.
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 1500, tier: 'global' });
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 1500, tier: 'local' });
    clock.advance(1500);
    expect(await limiter.consume('k')).toMatchObject({ allowed: true });
  });

  // Through the late store the reset's answer is read before the request's (its chain of promises
  // is shorter); over a plain `MemoryStore`, after it. Forgetting the denial again once the call
  // landed passed one order and failed the other.
  for (const late of [true, false]) {
    for (const call of ['reset', 'reward'] as const) {
      it(`keeps no denial asked for before a ${call} (${late ? 'late replies' : 'MemoryStore'})`, async () => {
        const clock = new FakeClock(1_000);
        const limiter = new RequestLimiter({
          store: late ? new LateReplies(clock) : new MemoryStore({ clock }),
          limits: perSecond(1),
          failurePolicy: 'closed',
          clock,
          rememberDenials: true,
        });
        await limiter.consume('k');
        // The request's op reaches the store first and is turned away; the call lands after it.
        const pending = limiter.consume('k');
        const done = call === 'reset' ? limiter.reset('k') : limiter.reward('k', 1);
        expect(await pending).toMatchObject({ allowed: false, retryAfterMs: 1000 });
        expect(await done).toBe(true);
        // Before: turned away in process for 1 s, the store holding a token.
        expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
        // A denial asked for after it is kept.
        expect(await limiter.consume('k')).toMatchObject({ allowed: false, tier: 'global' });
        expect(await limiter.consume('k')).toMatchObject({ allowed: false, tier: 'local' });
      });
    }
  }
});
