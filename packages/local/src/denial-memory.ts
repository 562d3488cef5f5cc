import {
  type BucketReply,
  type Clock,
  type Decision,
  denyDecision,
  type LimitSpec,
} from '@tiered-limiter/core';
import type { LRUCache } from 'lru-cache';
import { lruTable } from './table.js';

/** A denial the store gave: until when, when its limit is full again, and which limit it was. */
export interface Denial {
  readonly untilMs: number;
  readonly fullAtMs: number;
  readonly spec: LimitSpec;
}

/**
 * Keys the store turned away, kept in process until a token could pass: a request in that time
 * gets the store's answer again with no store op, as rate-limiter-flexible's
 * `inMemoryBlockOnConsumed` does. Only a denial of a cost of 1 is kept (its wait is the wait for
 * one token; a larger cost's would turn away a smaller one the bucket can already pay), and only
 * one asked for after the key's last `forget` and the last `clear`. It never admits anything the
 * store would not: at worst it turns a key away until its wait is over after another instance
 * gave tokens back. Bounded like the limiters' tables.
 */
export class DenialMemory {
  readonly #clock: Clock;
  readonly #denials: LRUCache<string, Denial>;
  /** Asks numbered so far (`ask`). */
  #asks = 0;
  /** Per key, the last ask before its denial was last forgotten (a reset, a reward). */
  readonly #forgotten: LRUCache<string, number>;
  /** The last ask before every denial was forgotten (new limits). */
  #cleared = 0;

  constructor(maxKeys: number, clock: Clock) {
    this.#clock = clock;
    this.#denials = lruTable<string, Denial>(maxKeys);
    this.#forgotten = lruTable<string, number>(maxKeys);
  }

  /**
   * Numbers a store op about to be asked for, for `remember`: its reply may come in after a
   * `forget` of its key or a `clear` made while it travelled, whose answer may even be read first
   * (the reset's chain of promises is shorter than the request's), and must not be kept then.
   */
  ask(): number {
    return ++this.#asks;
  }

  /**
   * Keeps `reply` for `key` if it turned a cost of 1 away, and no `forget` of the key nor `clear`
   * came since `ask`. Kept after a reset or reward that landed behind it, the key was turned away
   * here with a full bucket in the store (1 s at 1/s in the test); after `setLimits`, for the old
   * limits' wait (1,000 s against a new 100/s). Its waits count from `askedAtMs`, when the op was
   * asked for: the store decided then or later, so the denial ends no later than the store's.
   * Counted from when the reply was read, it outlived the store's wait by the round trip and any
   * stall of the event loop meanwhile (15 ms of 100 in the test).
   */
  remember(
    key: string,
    cost: number,
    reply: BucketReply,
    limits: readonly LimitSpec[],
    ask: number,
    askedAtMs: number,
  ): void {
    if (reply.ok || cost !== 1 || reply.retryAfterMs <= 0 || ask <= this.#cleared) return;
    if (this.#forgotten.size > 0 && ask <= (this.#forgotten.get(key) ?? 0)) return;
    const spec = limits[reply.limitIndex] ?? limits[0]!;
    this.#denials.set(key, {
      untilMs: askedAtMs + reply.retryAfterMs,
      fullAtMs: askedAtMs + reply.resetMs,
      spec,
    });
  }

  /** The kept denial of `key`, as a decision of the `local` tier, or `undefined` when its wait is over. */
  recall(key: string): Decision | undefined {
    if (this.#denials.size === 0) return undefined;
    const denial = this.#denials.get(key);
    if (denial === undefined) return undefined;
    const now = this.#clock.now();
    const left = denial.untilMs - now;
    if (left <= 0) {
      this.#denials.delete(key);
      return undefined;
    }
    return denyDecision(left, 0, Math.max(0, Math.ceil(denial.fullAtMs - now)), denial.spec, 'local');
  }

  /**
   * Forgets `key`'s denial (a reward or reset here may have given it tokens), and returns it, for
   * `around` to keep again should a reward not reach the store.
   */
  forget(key: string): Denial | undefined {
    this.#forgotten.set(key, this.#asks);
    const denial = this.#denials.get(key);
    if (denial !== undefined) this.#denials.delete(key);
    return denial;
  }

  /**
   * Runs `adjust`, a reward or penalty of `key`, with `key`'s denial forgotten: it no longer says
   * the wait (a reward may have given a token; after a penalty it said 500 ms where the store says
   * 1,500). Should `adjust` not land, the denial is kept again unless a newer one came meanwhile:
   * nothing changed, and without it the next request went to the failing store for its policy.
   * `adjust` calls `landedLate` when its op lands after all (its call timed out on the way): the
   * denial kept again goes then, as it would have had the reward been answered in time (kept, the
   * key was turned away here for its whole wait, 1,000 s in the test, with the token in the store).
   */
  around(key: string, adjust: (landedLate: () => void) => Promise<boolean>): Promise<boolean> {
    const denial = this.forget(key);
    if (denial === undefined) return adjust(() => {});
    let late = false;
    const landed = adjust(() => {
      late = true;
      if (this.#denials.get(key) === denial) this.#denials.delete(key);
    });
    return landed.then((ok) => {
      if (!ok && !late && !this.#denials.has(key)) this.#denials.set(key, denial);
      return ok;
    });
  }

  /** Forgets every denial (new limits). */
  clear(): void {
    this.#denials.clear();
    this.#forgotten.clear();
    this.#cleared = this.#asks;
  }
}
