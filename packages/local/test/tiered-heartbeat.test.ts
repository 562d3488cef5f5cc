import { MemoryStore } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';
import { IDLE_BEAT_MS } from '../src/tiered/fleet-registry.js';
import { fakeTime, HeldBeats, limiter } from './sync-kit.js';

describe('TieredLimiter heartbeats', () => {
  it('sends no heartbeat while its last one is unanswered, for up to its registration, held key or none', async () => {
    const { clock, advance } = fakeTime();
    const store = new HeldBeats(new MemoryStore({ clock }));
    const l = limiter(store, clock, { sync: { fleetCallsPerSecond: 20 } });
    const hit = async () => {
      l.tryConsume('k') ?? (await l.consume('k'));
      await advance(10);
    };
    // Idle for two IDLE_BEAT_MS, then holding a key (a beat every 50 ms period), 1,100 ms in all:
    // within the first beat's registration (3 periods and a second, 1,150 ms).
    for (let ms = 0; ms < 2 * IDLE_BEAT_MS; ms += 10) await advance(10);
    for (let ms = 0; ms < 600; ms += 10) await hit();
    // Before: one beat per IDLE_BEAT_MS, then one a period, each queued behind the first (12).
    expect(store.heartbeats).toBe(1);
    // Its registration has lapsed: one more beat, which waits as the first did.
    for (let ms = 0; ms < 200; ms += 10) await hit();
    expect(store.heartbeats).toBe(2);
    store.answer();
    for (let ms = 0; ms < 200; ms += 10) await hit();
    expect(store.heartbeats).toBe(3);
    // Answered at once from here on: a beat a period again.
    store.answer();
    for (let ms = 0; ms < 500; ms += 10) {
      await hit();
      store.answer();
    }
    expect(store.heartbeats).toBeGreaterThanOrEqual(3 + 8);
  });
});
