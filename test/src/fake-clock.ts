import type { Clock } from '@tiered-limiter/core';

/**
 * A clock that moves only when a test moves it, so every duration a test checks is exact.
 * It starts at `startMs` and may be `set` anywhere, backwards included, to test how a
 * limiter copes with a clock that misbehaves.
 */
export class FakeClock implements Clock {
  #nowMs: number;

  constructor(startMs = 0) {
    this.#nowMs = finite('startMs', startMs);
  }

  /** The current fake time, in milliseconds. */
  now(): number {
    return this.#nowMs;
  }

  /** Moves the clock forward by `ms` (fractions allowed) and returns the new time. */
  advance(ms: number): number {
    if (!(finite('ms', ms) >= 0)) throw new RangeError(`FakeClock.advance expects ms >= 0, got ${ms}`);
    this.#nowMs += ms;
    return this.#nowMs;
  }

  /** Puts the clock at `ms`, backwards included. */
  set(ms: number): void {
    this.#nowMs = finite('ms', ms);
  }
}

function finite(name: string, value: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new RangeError(`FakeClock expects \`${name}\` to be a finite number, got ${String(value)}`);
  }
  return value;
}
