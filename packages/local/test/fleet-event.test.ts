import { MemoryStore } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';
import { fakeTime, limiter } from './sync-kit.js';

describe('the fleet event', () => {
  it('fires once as the live fleet outgrows the declared one, not at every heartbeat, and again at the next crossing', async () => {
    const { clock, advance } = fakeTime();
    const store = new MemoryStore({ clock });
    const options = { instances: 2, sync: { fleetCallsPerSecond: 20 } };
    const watched = limiter(store, clock, options);
    const second = limiter(store, clock, options);
    const third = limiter(store, clock, options);
    const seen: unknown[] = [];
    watched.on('fleet', (info) => seen.push(info));
    // Busy, it beats every period (3 ÷ 18 per second: 167 ms): 18 beats in 3 s, all counting three.
    for (let ms = 0; ms < 3_000; ms += 10) {
      watched.tryConsume('hot') ?? (await watched.consume('hot'));
      await advance(10);
    }
    expect(watched.stats().liveInstances).toBe(3);
    expect(seen).toEqual([{ instances: 3, declared: 2 }]);
    // Back within the declared two, then past it again: a second crossing, told once.
    await third.close();
    for (let ms = 0; ms < 1_000; ms += 10) {
      watched.tryConsume('hot') ?? (await watched.consume('hot'));
      await advance(10);
    }
    expect(watched.stats().liveInstances).toBe(2);
    limiter(store, clock, options);
    limiter(store, clock, options);
    for (let ms = 0; ms < 1_000; ms += 10) {
      watched.tryConsume('hot') ?? (await watched.consume('hot'));
      await advance(10);
    }
    expect(watched.stats().liveInstances).toBe(4);
    expect(seen.slice(1)).toEqual([{ instances: 4, declared: 2 }]);
    expect(second.stats().liveInstances).toBe(4);
  });
});
