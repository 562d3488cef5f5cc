import { ArgumentError, type Clock } from '@tiered-limiter/core';
import type { LRUCache } from 'lru-cache';
import { lruTable } from './table.js';

/** Longest block accepted: about 24.8 days, the longest delay a Node.js timer can express. */
export const MAX_BLOCK_MS = 2 ** 31 - 1;

/** Checks the `ms` of a `block` call: a whole number of ms from 1 to `MAX_BLOCK_MS`. */
export function assertBlockMs(ms: unknown): number {
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 1 || ms > MAX_BLOCK_MS) {
    throw new ArgumentError('ms', ms, `an integer from 1 to ${MAX_BLOCK_MS}`);
  }
  return ms;
}

/**
 * Keys denied until a time, in process: a blocked key costs no store call. Bounded like the
 * limiters' tables; a block pushed out by `maxKeys` newer ones ends early.
 */
export class BlockList {
  readonly #clock: Clock;
  readonly #until: LRUCache<string, number>;

  constructor(maxKeys: number, clock: Clock) {
    this.#clock = clock;
    this.#until = lruTable<string, number>(maxKeys);
  }

  /** Denies `key` for `ms` from now (a later end replaces an earlier one, never the reverse). */
  block(key: string, ms: number): void {
    const until = this.#clock.now() + ms;
    const current = this.#until.get(key);
    if (current === undefined || until > current) this.#until.set(key, until);
  }

  /** Milliseconds `key` stays blocked, or 0. */
  blockedFor(key: string): number {
    if (this.#until.size === 0) return 0;
    const until = this.#until.get(key);
    if (until === undefined) return 0;
    const left = until - this.#clock.now();
    if (left > 0) return left;
    this.#until.delete(key);
    return 0;
  }

  /** Lifts a block. */
  unblock(key: string): void {
    this.#until.delete(key);
  }

  /** Lifts every block. */
  clear(): void {
    this.#until.clear();
  }
}
