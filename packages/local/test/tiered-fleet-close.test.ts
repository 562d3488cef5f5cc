// A heartbeat sent before close() and answered after it (on Redis, the tick's beat answered in the
// round trip close() starts in) still counted: the closed limiter emitted `fleet` for a fleet it
// had left, and resized its `local` fallback.
import { MemoryStore } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';
import { fakeTime, HeldBeats, limiter } from './sync-kit.js';

/**
 * A limiter declared alone (`instances: 1`, the `local` policy) whose heartbeats wait for
 * `store.answer()`, beside another instance alive for a minute: its first answer reads 2.
 */
async function declaredOneOfTwo() {
  const { clock, advance } = fakeTime();
  const store = new HeldBeats(new MemoryStore({ clock }));
  await store.inner.heartbeat('other', 60_000);
  const l = limiter(store, clock, {
    instances: 1,
    failurePolicy: 'local',
    sync: { fleetCallsPerSecond: 20 },
  });
  const events: unknown[] = [];
  l.on('fleet', (info) => events.push(info));
  return { advance, store, l, events };
}

describe('TieredLimiter fleet registry at close()', () => {
  it('emits no fleet event and keeps its fallback when a heartbeat answers after close()', async () => {
    const { advance, store, l, events } = await declaredOneOfTwo();
    const fallback = l.fallbackLimits;
    // The first tick (a 56 ms period) sends the first heartbeat, which waits for its answer.
    await advance(60);
    expect(store.heartbeats).toBe(1);
    const closed = l.close();
    store.answer();
    await advance(10);
    await closed;
    // Before: one event, { instances: 2, declared: 1 }, and the fallback halved to 50.
    expect(events).toEqual([]);
    expect(l.fallbackLimits).toBe(fallback);
    expect(store.heartbeats).toBe(1);
  });

  it('still emits fleet for a heartbeat answered before close()', async () => {
    const { advance, store, l, events } = await declaredOneOfTwo();
    await advance(60);
    store.answer();
    await advance(1);
    expect(events).toEqual([{ instances: 2, declared: 1 }]);
    expect(l.fallbackLimits?.[0]?.capacity).toBe(50);
    await l.close();
  });
});
