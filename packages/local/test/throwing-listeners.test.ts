// A user's event listener that throws must not reach the request path: the decision still
// settles by the declared policy, the other listeners still run, and the throw is reported once
// (a `TieredLimiterWarning`, code `TL_LISTENER_THREW`) instead of becoming an unhandled rejection.
import { type Decision, defineLimit } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock, ProcessReports } from '@tiered-limiter/test-harness';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { settle } from './fake-time.js';
import { ScriptedStore } from './store-doubles.js';
import { fakeTime, limiter } from './sync-kit.js';

const limits = defineLimit({ capacity: 10, refillPerSecond: 10 });
const reports = new ProcessReports();
const unhandled = reports.unhandled;
const warningCodes = () => reports.warningCodes();

beforeEach(() => reports.start());
afterEach(() => {
  reports.stop();
  vi.useRealTimers();
});

/** Whether `promise` has settled after the pending microtasks and one turn of the event loop. */
async function settledSoon(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  await settle();
  await settle();
  return done;
}

const makers = {
  RequestLimiter: (store: ScriptedStore) =>
    new RequestLimiter({
      store,
      limits,
      failurePolicy: 'open',
      breaker: { failureThreshold: 1, cooldownMs: 1000 },
    }),
  TieredLimiter: (store: ScriptedStore) =>
    new TieredLimiter({
      store,
      limits,
      failurePolicy: 'open',
      breaker: { failureThreshold: 1, cooldownMs: 1000 },
    }),
};

describe.each(Object.entries(makers))('%s: listeners that throw', (_name, make) => {
  it('a throwing failure and degraded listener leave the decision to the policy; later listeners still run', async () => {
    const store = new ScriptedStore(new MemoryStore());
    const l = make(store);
    const seen: string[] = [];
    l.on('failure', () => {
      throw new Error('alerting is down');
    });
    l.on('degraded', () => {
      throw new Error('pager is down');
    });
    l.on('failure', () => seen.push('failure'));
    l.on('degraded', () => seen.push('degraded'));
    store.mode = 'reject';
    const pending = l.consume('k');
    expect(await settledSoon(pending)).toBe(true);
    const decision: Decision = await pending;
    expect(decision.allowed).toBe(true);
    expect(decision.tier).toBe('fallback');
    expect(seen).toEqual(['failure', 'degraded']);
    expect(unhandled).toEqual([]);
    expect(warningCodes()).toEqual(['TL_LISTENER_THREW', 'TL_LISTENER_THREW']);
    await l.close();
  });

  it('a throwing recovered listener leaves the store answer in place, reported once over two recoveries', async () => {
    const clock = new FakeClock(0);
    const store = new ScriptedStore(new MemoryStore());
    const l =
      make === makers.RequestLimiter
        ? new RequestLimiter({
            store,
            limits,
            failurePolicy: 'closed',
            clock,
            breaker: { failureThreshold: 1, cooldownMs: 10 },
          })
        : new TieredLimiter({
            store,
            limits,
            failurePolicy: 'closed',
            clock,
            breaker: { failureThreshold: 1, cooldownMs: 10 },
          });
    l.on('recovered', () => {
      throw new Error('dashboard is down');
    });
    for (let round = 0; round < 2; round++) {
      store.mode = 'reject';
      expect((await l.consume(`down${round}`)).tier).toBe('fallback');
      clock.advance(20);
      store.mode = 'ok';
      const pending = l.consume(`up${round}`);
      expect(await settledSoon(pending)).toBe(true);
      const decision = await pending;
      expect(decision.allowed).toBe(true);
      expect(decision.tier).toBe('global');
      expect(l.degraded).toBe(false);
    }
    expect(unhandled).toEqual([]);
    expect(warningCodes()).toEqual(['TL_LISTENER_THREW']);
    await l.close();
  });

  it('a failure listener that throws when a call times out (in the timer) still lets the decision settle', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate'] });
    const store = new ScriptedStore(new MemoryStore());
    const l = make(store);
    l.on('failure', () => {
      throw new Error('alerting is down');
    });
    store.mode = 'hang';
    const pending = l.consume('k');
    // Past the guard's default timeout (20 ms).
    await vi.advanceTimersByTimeAsync(100);
    vi.useRealTimers();
    expect(await settledSoon(pending)).toBe(true);
    expect((await pending).tier).toBe('fallback');
    expect(warningCodes()).toEqual(['TL_LISTENER_THREW']);
    store.mode = 'ok';
    await l.close();
  });

  it('an async listener whose promise rejects is reported, not left as an unhandled rejection', async () => {
    const store = new ScriptedStore(new MemoryStore());
    const l = make(store);
    l.on('failure', async () => {
      throw new Error('webhook refused');
    });
    store.mode = 'reject';
    expect((await l.consume('k')).tier).toBe('fallback');
    await settle();
    expect(unhandled).toEqual([]);
    expect(warningCodes()).toEqual(['TL_LISTENER_THREW']);
    await l.close();
  });
});

describe('TieredLimiter: a fleet listener that throws', () => {
  it('does not become an unhandled rejection of the heartbeat', async () => {
    const { clock, advance } = fakeTime();
    const store = new MemoryStore({ clock });
    const options = { instances: 1, sync: { fleetCallsPerSecond: 20 } };
    const watched = limiter(store, clock, options);
    watched.on('fleet', () => {
      throw new Error('autoscaler is down');
    });
    const other = limiter(store, clock, options);
    for (let ms = 0; ms < 1_000; ms += 10) {
      watched.tryConsume('hot') ?? (await watched.consume('hot'));
      await advance(10);
    }
    expect(watched.stats().liveInstances).toBe(2);
    expect(unhandled).toEqual([]);
    expect(warningCodes()).toEqual(['TL_LISTENER_THREW']);
    await watched.close();
    await other.close();
  });
});
