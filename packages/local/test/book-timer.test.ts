import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BookTimer } from '../src/tiered/book-timer.js';

afterEach(() => {
  vi.useRealTimers();
});

/** Fake time for the timer and its clock alike; `ticks` records when the owner ran. */
function setUp(delays: number[]) {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  const clock = new FakeClock(0);
  const owner = { ticks: [] as number[], during: undefined as (() => void) | undefined };
  // Static in spirit: it reaches the owner only through its argument.
  const run = (o: typeof owner) => {
    o.ticks.push(clock.now());
    o.during?.();
    return delays.shift() ?? 100;
  };
  const advance = (ms: number) => {
    for (let i = 0; i < ms; i++) {
      clock.advance(1);
      vi.advanceTimersByTime(1);
    }
  };
  return { clock, owner, run, advance };
}

describe('BookTimer', () => {
  it('ticks at its first delay, then after each delay its owner returns', () => {
    const { clock, owner, run, advance } = setUp([30, 250]);
    const timer = new BookTimer(owner, run, clock, 20);
    expect(timer.nextAtMs).toBe(20);
    advance(400);
    expect(owner.ticks).toEqual([20, 50, 300, 400]);
    timer.stop();
  });

  it('brings a later tick forward, and never puts an earlier one off', () => {
    const { clock, owner, run, advance } = setUp([250]);
    const timer = new BookTimer(owner, run, clock, 20);
    advance(30);
    // Due at 270: brought to 30 + 20.
    timer.bringForward(20);
    expect(timer.nextAtMs).toBe(50);
    // Due at 50 already: 30 + 100 would be later.
    timer.bringForward(100);
    expect(timer.nextAtMs).toBe(50);
    advance(120);
    expect(owner.ticks).toEqual([20, 50, 150]);
    timer.stop();
  });

  it('lets the delay its owner returns set the next tick when asked to bring it forward during one', () => {
    const { clock, owner, run, advance } = setUp([250]);
    const timer = new BookTimer(owner, run, clock, 20);
    owner.during = () => timer.bringForward(5);
    advance(300);
    expect(owner.ticks).toEqual([20, 270]);
    timer.stop();
  });

  it('stops for good', () => {
    const { clock, owner, run, advance } = setUp([]);
    const timer = new BookTimer(owner, run, clock, 20);
    advance(20);
    timer.stop();
    timer.bringForward(1);
    advance(500);
    expect(owner.ticks).toEqual([20]);
    expect(timer.running).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });
});
