// A limiter told the store it was alive only when a sync round began, and its registration lives
// three periods and a second. A round that outlasted that (its slices waiting on a slow store) let
// the registration lapse mid-round, and the rest of the fleet counted one instance fewer, with a
// larger fair share each, until the round ended.
import { type BucketReply, defineLimit, type GlobalStore } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';
import { fakeTime, limiter } from './sync-kit.js';

const KEYS = 300;

describe('TieredLimiter registration through a long round', () => {
  it('stays counted by the fleet while a round outlasts its registration', async () => {
    const { clock, advance } = fakeTime();
    const inner = new MemoryStore({ clock });
    let slow = false;
    // One instance's view of the store: its ops answer 2 s late once `slow`; heartbeats at once.
    const store: GlobalStore = {
      apply(op) {
        const reply = inner.apply(op);
        if (!slow) return reply;
        return new Promise<BucketReply>((resolve) => setTimeout(() => resolve(reply), 2_000));
      },
      reset: (key, limits) => inner.reset(key, limits),
      heartbeat: (instance, ttlMs) => inner.heartbeat(instance, ttlMs),
      leave: (instance) => inner.leave(instance),
    };
    const limits = defineLimit({ capacity: 1000, refillPerSecond: 1000 });
    // 300 held keys: a round of two slices, the second sent once the store answered the first.
    const busy = limiter(store, clock, { limits, maxKeys: 10_000, timeoutMs: 5_000 });
    // A request per key every 100 ms; one at most waits on the store per key.
    const waiting = new Set<string>();
    const hitAll = () => {
      for (let i = 0; i < KEYS; i++) {
        const key = `k${i}`;
        if (waiting.has(key) || busy.tryConsume(key) !== undefined) continue;
        waiting.add(key);
        void busy.consume(key).then(() => waiting.delete(key));
      }
    };
    for (let i = 0; i < KEYS; i++) {
      await busy.consume(`k${i}`);
      await busy.consume(`k${i}`);
    }
    const other = limiter(inner, clock, { limits });
    for (let ms = 0; ms < 1_000; ms += 100) {
      hitAll();
      await advance(100);
    }
    expect(other.stats().liveInstances).toBe(2);
    // A registration of three periods (2 × 10 calls ÷ 180 s: 111 ms) and a second is 1,333 ms;
    // a round now takes 2 s.
    slow = true;
    const counted: number[] = [];
    for (let ms = 0; ms < 5_000; ms += 100) {
      hitAll();
      await advance(100);
      counted.push(other.stats().liveInstances ?? 0);
    }
    // Read while the rounds are slow: once they are not, the keys let go shorten it, earlier or
    // later by where the rounds fall.
    expect(busy.stats().syncPeriodMs).toBe(111);
    // The calls still out land before the limiters close (their answers wait on fake timers).
    slow = false;
    for (let ms = 0; ms < 2_500; ms += 100) await advance(100);
    // Before: 1 for 600-700 ms of each 2 s round.
    expect(Math.min(...counted)).toBe(2);
  });
});
