import type { FakeClock } from '@tiered-limiter/test-harness';
import { vi } from 'vitest';

/** Lets promise chains run, on the real `setImmediate` the fake-time tests leave unfaked. */
export const settle = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Moves `clock` and vitest's faked timers together a millisecond at a time, then lets promise
 * chains run: a waiter's sleep and the limiter's clock agree at every step, so a wake lands at the
 * millisecond it is due rather than at the end of a long jump.
 */
export async function advanceStepwise(clock: FakeClock, ms: number): Promise<void> {
  for (let i = 0; i < ms; i++) {
    clock.advance(1);
    await vi.advanceTimersByTimeAsync(1);
  }
  await settle();
}
