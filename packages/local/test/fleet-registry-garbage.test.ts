// A custom store's fleet registry that answers garbage: a heartbeat that resolves what is not a
// count of instances is read as no answer (the fleet stays as declared), and a `leave` that throws
// rather than rejects does not reject `close()`.
import { MemoryStore } from '@tiered-limiter/local';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { fakeTime, limiter } from './sync-kit.js';

afterEach(() => {
  vi.useRealTimers();
});

/** A `MemoryStore` whose heartbeat resolves `count`, and whose `leave` throws at once. */
class GarbageRegistry extends MemoryStore {
  constructor(
    clock: { now(): number },
    readonly count: unknown,
  ) {
    super({ clock });
  }
  override heartbeat(): Promise<number> {
    return Promise.resolve(this.count as number);
  }
  override leave(): Promise<void> {
    throw new Error('registry offline');
  }
}

describe('a fleet registry that answers garbage', () => {
  it.each([
    ['NaN', Number.NaN],
    ['a string', '3'],
    ['0', 0],
    ['a fraction', 2.5],
    ['undefined', undefined],
  ])('a heartbeat resolving %s leaves the fleet as declared', async (_what, count) => {
    const { clock, advance } = fakeTime();
    const store = new GarbageRegistry(clock, count);
    const l = limiter(store, clock, {
      instances: 2,
      sync: { fleetCallsPerSecond: 20 },
      failurePolicy: 'local',
    });
    const fleet: unknown[] = [];
    l.on('fleet', (info) => fleet.push(info));
    for (let ms = 0; ms < 1_000; ms += 10) {
      l.tryConsume('hot') ?? (await l.consume('hot'));
      await advance(10);
    }
    expect(l.stats().liveInstances).toBeUndefined();
    expect(l.stats().instances).toBe(2);
    expect(fleet).toEqual([]);
  });

  it('a leave that throws synchronously does not reject close()', async () => {
    const { clock } = fakeTime();
    const l = limiter(new GarbageRegistry(clock, 1), clock, {
      instances: 1,
      sync: { fleetCallsPerSecond: 20 },
    });
    await expect(l.close()).resolves.toBeUndefined();
  });
});
