import { assertInteger, type Clock, ConfigError, type Decision } from '@tiered-limiter/core';
import { DEFAULT_MAX_WAIT_MS } from './tiered-defaults.js';

/** Options of `acquire`. */
export interface AcquireOptions {
  /**
   * Longest the caller will wait, in ms. A request whose next chance lies beyond it gives up
   * at once rather than sleeping in vain.
   * @default 10_000
   */
  maxWaitMs?: number;
  /** Aborts the wait; the result then says `aborted`. */
  signal?: AbortSignal;
}

/**
 * The outcome of `acquire`: `acquired` with the admitting decision, or the reason it gave
 * up (`timeout`, `aborted`) with the last denial it saw. Never a rejection.
 */
export interface AcquireResult {
  /** Whether the tokens were taken. */
  readonly acquired: boolean;
  /** `acquired`, or why it gave up. */
  readonly reason: 'acquired' | 'timeout' | 'aborted';
  /** The last decision: the admitting one, or the denial it gave up on. */
  readonly decision: Decision | undefined;
  /** Milliseconds spent waiting, the time in line included. */
  readonly waitedMs: number;
}

/**
 * A FIFO line per key: each holder's turn starts when the previous one's ends, so that an
 * early waiter is not overtaken by a later one that happens to wake first.
 */
export class KeyedQueue {
  readonly #tails = new Map<string, Promise<void>>();

  /** Runs `task` when every earlier task of `key` has finished. */
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const result = previous.then(task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }
}

/** Waits in `queue`'s line for `key`, retrying `attempt` at each `retryAfterMs` until admitted or out of time. */
export function acquireInLine(
  queue: KeyedQueue,
  key: string,
  attempt: () => Promise<Decision>,
  clock: Clock,
  options: AcquireOptions,
): Promise<AcquireResult> {
  if (options === null || typeof options !== 'object') throw new ConfigError('options', options, 'an object');
  const maxWaitMs = assertInteger('maxWaitMs', options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS, 0, 2_147_483_647);
  const { signal } = options;
  const start = clock.now();
  const result = (reason: AcquireResult['reason'], decision: Decision | undefined): AcquireResult => ({
    acquired: reason === 'acquired',
    reason,
    decision,
    waitedMs: clock.now() - start,
  });
  return queue.run(key, async () => {
    let last: Decision | undefined;
    for (;;) {
      if (signal?.aborted) return result('aborted', last);
      last = await attempt();
      if (last.allowed) return result('acquired', last);
      const left = start + maxWaitMs - clock.now();
      if (last.retryAfterMs > left) return result('timeout', last);
      if (!(await sleep(last.retryAfterMs, signal))) return result('aborted', last);
    }
  });
}

/** Resolves true after `ms`, or false as soon as `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    // Not unref'd, unlike the limiter's own timers: the caller is awaiting this wait, bounded
    // by maxWaitMs, and a script whose only work is an acquire must not exit in the middle of it.
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
