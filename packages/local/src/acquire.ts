import {
  ArgumentError,
  type Clock,
  ClosedError,
  CostExceedsCapacityError,
  type Decision,
  internal,
} from '@tiered-limiter/core';
import { onAbort } from './abort-fanout.js';
import { DEFAULT_MAX_WAIT_MS } from './defaults.js';

const { assertInteger } = internal;

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
 * up (`timeout`, also when `setLimits` left a capacity below the cost while it waited; `aborted`;
 * or `closed` when the limiter closed while it waited) with the last denial it saw. Never a
 * rejection.
 */
export interface AcquireResult {
  /** Whether the tokens were taken. */
  readonly acquired: boolean;
  /** `acquired`, or why it gave up. */
  readonly reason: 'acquired' | 'timeout' | 'aborted' | 'closed';
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
  /**
   * How to wake each key's waiter in turn, asleep on a denial's wait or with a try out (one a key
   * at most).
   */
  readonly #sleepers = new Map<string, () => void>();

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

  /**
   * Marks `wake` as how `key`'s waiter in turn is woken, for its whole turn: it ends a sleep, or
   * tells a try still out that its denial may say nothing any more. Returns its removal.
   */
  sleeping(key: string, wake: () => void): () => void {
    this.#sleepers.set(key, wake);
    return () => {
      if (this.#sleepers.get(key) === wake) this.#sleepers.delete(key);
    };
  }

  /**
   * Makes `key`'s sleeping waiter try again now: its last denial's wait may say nothing any more
   * (a reset, a reward or a grant that landed late made tokens, a block outlasts its bound).
   */
  wake(key: string): void {
    this.#sleepers.get(key)?.();
  }

  /** Makes every sleeping waiter try again now (new limits: a wait the old ones gave is stale). */
  wakeAll(): void {
    for (const wake of [...this.#sleepers.values()]) wake();
  }

  /** `landed`, once it has woken `key`'s sleeping waiter if it resolved `true`. */
  wakeOn(key: string, landed: Promise<boolean>): Promise<boolean> {
    return landed.then((ok) => {
      if (ok) this.wake(key);
      return ok;
    });
  }
}

/**
 * Checks `acquire`'s options where they are given, so that a bad `signal` (an AbortController
 * instead of its signal, say) fails the call at once rather than a timer later.
 */
export function assertAcquireOptions(options: unknown): {
  maxWaitMs: number;
  signal: AbortSignal | undefined;
} {
  if (options === null || typeof options !== 'object' || Array.isArray(options))
    throw new ArgumentError('options', options, 'an object');
  const o = options as AcquireOptions;
  // A misspelt option (`maxWait`) left the default wait of 10 s in force, silently.
  for (const [name, value] of Object.entries(o)) {
    if (value !== undefined && name !== 'maxWaitMs' && name !== 'signal') {
      throw new ArgumentError(
        name,
        value,
        'not set: it is not an option of acquire (known: maxWaitMs, signal)',
      );
    }
  }
  const maxWaitMs = o.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
  if (
    typeof maxWaitMs !== 'number' ||
    !Number.isInteger(maxWaitMs) ||
    maxWaitMs < 0 ||
    maxWaitMs > 2_147_483_647
  ) {
    throw new ArgumentError('maxWaitMs', maxWaitMs, 'an integer from 0 to 2147483647');
  }
  const signal = o.signal;
  if (
    signal !== undefined &&
    (signal === null ||
      typeof signal !== 'object' ||
      typeof (signal as AbortSignal).aborted !== 'boolean' ||
      typeof (signal as AbortSignal).addEventListener !== 'function')
  ) {
    throw new ArgumentError('signal', signal, 'an AbortSignal (controller.signal, not the controller)');
  }
  return { maxWaitMs: assertInteger('maxWaitMs', maxWaitMs, 0, 2_147_483_647), signal };
}

/**
 * Waits in `queue`'s line for `key`, retrying `attempt` at each `retryAfterMs` until admitted, out
 * of time, aborted, or `closing` fires (the limiter closed: the wait ends at once, `closed`). The
 * time in line counts: a waiter behind a longer one gives up at its own `maxWaitMs`, or when its
 * signal aborts, without its turn (it waited for the one ahead of it, 5 s behind a `closed`
 * policy's retries, with a `maxWaitMs` of 100); its turn, when it comes, is skipped.
 */
export function acquireInLine(
  queue: KeyedQueue,
  key: string,
  attempt: () => Promise<Decision>,
  clock: Clock,
  options: { maxWaitMs: number; signal: AbortSignal | undefined },
  closing: AbortSignal,
): Promise<AcquireResult> {
  const { maxWaitMs, signal } = options;
  const start = clock.now();
  const result = (reason: AcquireResult['reason'], decision: Decision | undefined): AcquireResult => ({
    acquired: reason === 'acquired',
    reason,
    decision,
    waitedMs: clock.now() - start,
  });
  /** Whether this waiter's turn came (from then on its loop watches the bound and the signals), or it left the line. */
  let turn: 'waiting' | 'started' | 'left' = 'waiting';
  const inTurn = queue.run(key, async (): Promise<AcquireResult | undefined> => {
    if (turn === 'left') return undefined;
    turn = 'started';
    // Woken while a try was out: a reset, reward, block or setLimits landed after the try was
    // asked for, and its denial may be the store's answer from before (the limiter keeps no such
    // denial). Slept on, the wake had come and gone: 5 s at a token per 5 s, the token there.
    let woken = false;
    let endSleep: (() => void) | undefined;
    const stopWaking = queue.sleeping(key, () => {
      woken = true;
      endSleep?.();
    });
    const onWake = (wake: () => void) => {
      endSleep = wake;
      return () => {
        endSleep = undefined;
      };
    };
    let last: Decision | undefined;
    try {
      for (;;) {
        if (closing.aborted) return result('closed', last);
        if (signal?.aborted) return result('aborted', last);
        woken = false;
        try {
          last = await attempt();
        } catch (error) {
          if (error instanceof ClosedError) return result('closed', last);
          // `setLimits` lowered the capacity below the cost while it waited: no wait can admit it
          // now, so it gives up as one whose next chance lies past `maxWaitMs` (never a rejection).
          if (error instanceof CostExceedsCapacityError) return result('timeout', last);
          throw error;
        }
        if (last.allowed) return result('acquired', last);
        // Closed or aborted while the try was out: that is why the wait ends (the loop's top says
        // which), not the try's wait past the bound (`timeout` let a caller retry on a closed
        // limiter). Woken while it was out: its wait may be stale, so it tries again.
        if (closing.aborted || signal?.aborted || woken) continue;
        const left = start + maxWaitMs - clock.now();
        if (last.retryAfterMs > left) return result('timeout', last);
        await sleep(last.retryAfterMs, signal, closing, onWake);
      }
    } finally {
      stopWaking();
    }
  });
  return new Promise<AcquireResult>((resolve, reject) => {
    const leave = (reason: AcquireResult['reason']) => {
      if (turn !== 'waiting') return;
      turn = 'left';
      done();
      resolve(result(reason, undefined));
    };
    // Ref'd, as the loop's sleeps are: the caller awaits it, bounded by maxWaitMs.
    const timer = setTimeout(() => leave('timeout'), maxWaitMs);
    const stopAbort = signal === undefined ? undefined : onAbort(signal, () => leave('aborted'));
    const stopClosing = onAbort(closing, () => leave('closed'));
    const done = () => {
      clearTimeout(timer);
      stopAbort?.();
      stopClosing();
    };
    // An abort before the call fires no event: behind another waiter, it would wait its turn.
    if (closing.aborted) leave('closed');
    else if (signal?.aborted) leave('aborted');
    inTurn.then(
      (outcome) => {
        done();
        if (outcome !== undefined) resolve(outcome);
      },
      (error: unknown) => {
        done();
        reject(error);
      },
    );
  });
}

/**
 * Resolves after `ms`, as soon as either signal aborts (the loop then says which), or when the
 * limiter wakes it (`onWake` hands it the way to, and returns how to forget it).
 */
function sleep(
  ms: number,
  signal: AbortSignal | undefined,
  closing: AbortSignal,
  onWake: (wake: () => void) => () => void,
): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted || closing.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      stopAbort?.();
      stopClosing();
      forget();
      resolve();
    };
    // Not unref'd, unlike the limiter's own timers: the caller is awaiting this wait, bounded
    // by maxWaitMs, and a script whose only work is an acquire must not exit in the middle of it.
    const timer = setTimeout(done, ms);
    const stopAbort = signal === undefined ? undefined : onAbort(signal, done);
    const stopClosing = onAbort(closing, done);
    const forget = onWake(done);
  });
}
