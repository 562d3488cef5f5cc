import { MessageChannel } from 'node:worker_threads';
import { StoreError, StoreTimeoutError } from '@tiered-limiter/core';
import { StoreGuard } from '@tiered-limiter/local';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

// The breaker's streak: what counts toward `failureThreshold`. Fake timers fire the guard's
// timeouts; the guard's clock reads the same fake time. `setImmediate` stays real: the guard calls
// a timeout in the turn of the event loop after its timer (a fake one, run 1 ms on, would move it).
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
});
afterEach(() => {
  vi.useRealTimers();
});

const TIMEOUT_MS = 20;

function guard() {
  return new StoreGuard({
    timeoutMs: TIMEOUT_MS,
    breaker: { failureThreshold: 3, cooldownMs: 1000 },
    clock: { now: () => Date.now() },
  });
}

/** A call that answers only when told to. */
function hanging() {
  let answer: (value: number) => void = () => {};
  const call = () => new Promise<number>((resolve) => (answer = resolve));
  return { call, answer: (value: number) => answer(value) };
}

/** Starts `n` calls that hang, lets their timeouts fire together, and returns them. */
async function timeOutTogether(g: StoreGuard, n: number) {
  const calls = Array.from({ length: n }, () => hanging());
  const results = calls.map((c) => g.run(c.call));
  await vi.advanceTimersByTimeAsync(TIMEOUT_MS);
  for (const result of await Promise.all(results)) expect(result.ok).toBe(false);
  return calls;
}

describe('StoreGuard: the streak that opens the breaker', () => {
  it('timeouts that fire together count once: a stall times out every call in flight at once', async () => {
    const g = guard();
    await timeOutTogether(g, 10);
    expect(g.state).toBe('closed');
    expect(g.failures).toBe(10);
    await timeOutTogether(g, 10);
    expect(g.state).toBe('closed');
    await timeOutTogether(g, 1);
    expect(g.state).toBe('open');
  });

  it('timeouts that fire within timeoutMs of the one counted count with it; timeoutMs later they count again', async () => {
    const g = guard();
    // One slow moment of the store: calls sent 5 ms apart time out 5 ms apart, at 20, 25, 30 and 35 ms.
    const slow = [];
    for (let i = 0; i < 4; i++) {
      slow.push(g.run(hanging().call));
      await vi.advanceTimersByTimeAsync(5);
    }
    // Sent at 20 ms, it times out at 40: timeoutMs after the one counted.
    const second = g.run(hanging().call);
    await vi.advanceTimersByTimeAsync(15);
    for (const result of await Promise.all(slow)) expect(result.ok).toBe(false);
    expect(g.failures).toBe(4);
    expect(g.state).toBe('closed');
    await vi.advanceTimersByTimeAsync(5);
    expect((await second).ok).toBe(false);
    expect(g.state).toBe('closed');
    // A third, timeoutMs later again: the threshold of 3.
    const third = g.run(hanging().call);
    await vi.advanceTimersByTimeAsync(TIMEOUT_MS);
    expect((await third).ok).toBe(false);
    expect(g.state).toBe('open');
  });

  it('errors count one each: a store that refuses at once opens it after failureThreshold calls', async () => {
    const g = guard();
    for (let i = 0; i < 3; i++) {
      expect(g.state).toBe('closed');
      await g.run(() => Promise.reject(new StoreError('refused')));
    }
    expect(g.state).toBe('open');
  });

  it('a late answer to a call that timed out breaks the streak, but leaves an open breaker open', async () => {
    const g = guard();
    const [first] = await timeOutTogether(g, 1);
    await timeOutTogether(g, 1);
    first!.answer(1);
    await vi.advanceTimersByTimeAsync(0);
    // Two more timeouts after the late answer: a streak of two, not four.
    await timeOutTogether(g, 1);
    await timeOutTogether(g, 1);
    expect(g.state).toBe('closed');
    const [late] = await timeOutTogether(g, 1);
    expect(g.state).toBe('open');
    late!.answer(1);
    await vi.advanceTimersByTimeAsync(0);
    expect(g.state).toBe('open');
  });
});

describe('StoreGuard: a timeout after a stall of this process', () => {
  beforeEach(() => {
    vi.useRealTimers();
  });

  it('says how late the event loop ran its timer, so that a log tells a stall from a slow store', async () => {
    const g = new StoreGuard({ timeoutMs: TIMEOUT_MS, breaker: false });
    const result = g.run(hanging().call);
    // The process is busy for 80 ms: the 20 ms timer runs at least 60 ms late.
    const until = performance.now() + 80;
    while (performance.now() < until) {
      // a stall of this process, as a long synchronous task or garbage collection makes one
    }
    const outcome = await result;
    expect(outcome.ok).toBe(false);
    const error = outcome.ok ? undefined : outcome.error;
    expect(error).toBeInstanceOf(StoreTimeoutError);
    expect((error as StoreTimeoutError).loopLateMs).toBeGreaterThanOrEqual(55);
    expect(error?.message).toMatch(/event loop ran the timer \d+ ms late/);
  });

  it('counts a stall once, however many timers it made late, from when they were due', async () => {
    const g = new StoreGuard({ timeoutMs: TIMEOUT_MS, breaker: false });
    const before = performance.now();
    const results = [g.run(hanging().call), g.run(hanging().call), g.run(hanging().call)];
    const until = performance.now() + 80;
    while (performance.now() < until) {
      // one stall of this process, which makes all three timers late
    }
    await Promise.all(results);
    const settledAt = performance.now();
    // Due 20 ms in, run at the stall's end: about 60 ms seen, counted once (three timers would
    // lengthen a budget begun before it by 180 ms).
    expect(g.deadlineOf(before)).toBeGreaterThanOrEqual(before + TIMEOUT_MS + 55);
    expect(g.deadlineOf(before)).toBeLessThanOrEqual(settledAt + TIMEOUT_MS);
    expect(g.deadlineOf(settledAt)).toBe(settledAt + TIMEOUT_MS);
  });

  it('counts a stall until the reply waiting past its timer is read: the budget after it starts there', async () => {
    const g = new StoreGuard({ timeoutMs: TIMEOUT_MS, breaker: false });
    // The reply waits in a port, read in the poll phase as a socket's is: posted before the stall.
    const { port1, port2 } = new MessageChannel();
    const before = performance.now();
    const result = g.run(() => new Promise<number>((resolve) => port1.once('message', resolve)));
    // Due just after the guard's timer: it holds up the turn between that timer and the poll phase,
    // as a process descheduled there was on 2 busy cores (18–24 ms, with the replies unread).
    const heldUp = setTimeout(() => busyFor(60), TIMEOUT_MS + 1);
    port2.postMessage(1);
    busyFor(40);
    const outcome = await result;
    const readAt = performance.now();
    clearTimeout(heldUp);
    port1.close();
    expect(outcome).toEqual({ ok: true, value: 1 });
    // Before, the stall ended where the timer ran, 60 ms before the read: a request's one more call
    // after the stall had none of its timeout left (the two-tier limiter decided 56 requests by policy).
    expect(g.deadlineOf(before) - readAt).toBeGreaterThanOrEqual(TIMEOUT_MS / 2);
  });
});

function busyFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // this process stalls, as a long synchronous task or a descheduled thread makes it
  }
}
