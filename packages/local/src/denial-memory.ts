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
 * one token; a larger cost's would turn away a smaller one the bucket can already pay). It never
 * admits anything the store would not: at worst it turns a key away until its wait is over after
 * another instance gave tokens back. Bounded like the limiters' tables.
 */
export class DenialMemory {
  readonly #clock: Clock;
  readonly #denials: LRUCache<string, Denial>;

  constructor(maxKeys: number, clock: Clock) {
    this.#clock = clock;
    this.#denials = lruTable<string, Denial>(maxKeys);
  }

  /** Keeps `reply` for `key` if it turned a cost of 1 away. */
  remember(key: string, cost: number, reply: BucketReply, limits: readonly LimitSpec[]): void {
    if (reply.ok || cost !== 1 || reply.retryAfterMs <= 0) return;
    const now = this.#clock.now();
    const spec = limits[reply.limitIndex] ?? limits[0]!;
    this.#denials.set(key, { untilMs: now + reply.retryAfterMs, fullAtMs: now + reply.resetMs, spec });
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
   * `restore` should the reward not reach the store.
   */
  forget(key: string): Denial | undefined {
    const denial = this.#denials.get(key);
    if (denial !== undefined) this.#denials.delete(key);
    return denial;
  }

  /**
   * Keeps `denial` for `key` again unless a newer one came meanwhile: a reward that failed gave no
   * token, and without it the next request went to the failing store for its policy to decide.
   */
  restore(key: string, denial: Denial): void {
    if (!this.#denials.has(key)) this.#denials.set(key, denial);
  }

  /** Forgets every denial (new limits). */
  clear(): void {
    this.#denials.clear();
  }
}
