import type { BucketOp, BucketReply, GlobalStore, LimitSpec } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import type { FakeClock } from '@tiered-limiter/test-harness';

/**
 * `MemoryStore` whose replies reach the limiter `lagMs` of fake time after the store decided, or
 * (`hold`) only when the test `release`s them: a round trip, or an event loop busy elsewhere. An
 * op held has run already: a call made meanwhile lands after it.
 */
export class LateReplies implements GlobalStore {
  lagMs = 0;
  hold = false;
  /** The store behind, for a test to spend from as another instance would. */
  readonly inner: MemoryStore;
  readonly #clock: FakeClock;
  readonly #held: (() => void)[] = [];

  constructor(clock: FakeClock) {
    this.#clock = clock;
    this.inner = new MemoryStore({ clock });
  }

  async apply(op: BucketOp): Promise<BucketReply> {
    const reply = await this.inner.apply(op);
    if (this.hold) await new Promise<void>((resolve) => this.#held.push(resolve));
    this.#clock.advance(this.lagMs);
    return reply;
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.inner.reset(key, limits);
  }

  release(): void {
    this.hold = false;
    for (const resolve of this.#held.splice(0)) resolve();
  }
}

/**
 * A store that runs each op on `inner` at once and answers it `lateMs` later on the (faked)
 * `setTimeout`, while `late.on`: the op ran, and its caller's timeout may fire before the answer.
 */
export function answeringLate(inner: MemoryStore, late: { on: boolean }, lateMs: number): GlobalStore {
  return {
    apply(op) {
      const reply = inner.apply(op);
      if (!late.on) return reply;
      return new Promise<BucketReply>((resolve) => setTimeout(() => resolve(reply), lateMs));
    },
    reset: (key, limits) => inner.reset(key, limits),
  };
}
