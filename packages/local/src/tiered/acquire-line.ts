import { setMaxListeners } from 'node:events';
import type { Clock, Decision } from '@tiered-limiter/core';
import { type AcquireResult, acquireInLine, KeyedQueue } from '../acquire.js';

/**
 * A two-tier limiter's `acquire` waiters: a FIFO line per key, whose sleepers the management calls
 * and landed grants wake (`KeyedQueue`), and the one signal that ends every wait when the limiter
 * closes. Kept beside the limiter's class, which holds the hot path, as the rest of its cold parts are.
 */
export class AcquireLine extends KeyedQueue {
  readonly #closing = new AbortController();

  constructor() {
    super();
    // Every acquire() waiting listens for close() on it (removed as it ends): 11 of them made Node
    // warn of a leak.
    setMaxListeners(0, this.#closing.signal);
  }

  /**
   * Waits in `key`'s line, trying `attempt` at each denial's `retryAfterMs`, until admitted, out of
   * `maxWaitMs`, aborted by `signal`, or closed (`acquireInLine`). Never rejects.
   */
  acquire(
    key: string,
    attempt: () => Promise<Decision>,
    clock: Clock,
    options: { maxWaitMs: number; signal: AbortSignal | undefined },
  ): Promise<AcquireResult> {
    return acquireInLine(this, key, attempt, clock, options, this.#closing.signal);
  }

  /** Ends every wait, under way or to come, with `closed`. */
  close(): void {
    this.#closing.abort();
  }
}
