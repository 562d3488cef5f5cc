import type { Lease } from './lease.js';

/**
 * The shortest time a key's first hit is remembered, in ms: the sync's longest period. A key
 * back within it gets a `Lease` (the sync then weighs whether it leases tokens), whatever the
 * period is now. Tied to the period in force, a limiter holding few keys (a 22 ms period at 4
 * instances) would forget 100,000 keys taken in turn before each came back: none would become
 * a candidate of the sync, so the period would never grow and none would ever lease.
 */
export const MIN_SIGHTING_WINDOW_MS = 5_000;

/**
 * Keys a two-tier limiter has seen once lately and keeps no lease for (issue 11, sparse keys): a
 * key's first hit is a take of its own and a mark here, and a hit within the window turns the
 * mark into a lease. Two generations of `Map`s, each at most `maxKeys` marks and a window long;
 * the older one is dropped whole, so a mark lives one to two windows and costs no timer, no
 * linked list and no object of its own. A key seen once costs a map entry, not a `Lease` and a
 * table slot (420–520 bytes) and a sync op.
 */
export class FirstSightings {
  readonly #maxKeys: number;
  readonly #windowMs: () => number;
  #current = new Map<string, number>();
  #previous = new Map<string, number>();
  #startedAtMs: number;
  /** The first keys marked since the last sync round, at most `#recentCap` (`recent()`). */
  #recent: string[] = [];
  readonly #recentCap: number;

  /**
   * `windowMs` is read at each turn of generation: the lease lifetime it follows can change.
   * `recentCap`: how many of the keys marked between two sync rounds `recent()` remembers.
   */
  constructor(maxKeys: number, windowMs: () => number, nowMs: number, recentCap: number) {
    this.#maxKeys = maxKeys;
    this.#windowMs = windowMs;
    this.#startedAtMs = nowMs;
    this.#recentCap = recentCap;
  }

  /** Keys marked now, in both generations. */
  get size(): number {
    return this.#current.size + this.#previous.size;
  }

  /** Marks `key` as first seen at `nowMs`. */
  mark(key: string, nowMs: number): void {
    this.#turn(nowMs, this.#current.size >= this.#maxKeys);
    this.#current.set(key, nowMs);
    if (this.#recent.length < this.#recentCap) this.#recent.push(key);
  }

  /**
   * Drops the generations the window has passed at `nowMs`, as a mark would. Called by each sync
   * round and before a count: marks turned over only when a new key came, so after a spell of
   * new keys a limiter that saw no more kept them, and counted them as seen once, for good.
   */
  age(nowMs: number): void {
    this.#turn(nowMs, false);
  }

  /** A new generation when the current one is a window old or `full`; none left when both are past. */
  #turn(nowMs: number, full: boolean): void {
    const elapsedMs = nowMs - this.#startedAtMs;
    const windowMs = this.#windowMs();
    if (elapsedMs >= 2 * windowMs) {
      // Both generations are past: a quiet spell must not leave the older one a window longer.
      this.#previous = new Map();
      this.#current = new Map();
      this.#startedAtMs = nowMs;
    } else if (elapsedMs >= windowMs || full) {
      this.#previous = this.#current;
      this.#current = new Map();
      this.#startedAtMs = nowMs;
    }
  }

  /** The first keys marked since the last call (some may have a lease by now), and starts anew. */
  recent(): readonly string[] {
    const recent = this.#recent;
    if (recent.length > 0) this.#recent = [];
    return recent;
  }

  /**
   * When `key` was first seen, if within two windows of `nowMs`, forgetting the mark (the key gets
   * a lease now); `undefined` if not.
   */
  take(key: string, nowMs: number): number | undefined {
    let generation = this.#current;
    let seenAtMs = generation.get(key);
    if (seenAtMs === undefined) {
      generation = this.#previous;
      seenAtMs = generation.get(key);
      if (seenAtMs === undefined) return undefined;
    }
    generation.delete(key);
    return nowMs - seenAtMs < 2 * this.#windowMs() ? seenAtMs : undefined;
  }

  /**
   * Forgets `key`'s mark (`reset`): a first hit's take still out then, turned away by the bucket
   * before the reset landed, would otherwise make the key's lease at its reply, and with it the
   * denial, with a full bucket in the store.
   */
  forget(key: string): void {
    this.#current.delete(key);
    this.#previous.delete(key);
  }

  /** Forgets every mark (`close()`). */
  clear(): void {
    this.#current = new Map();
    this.#previous = new Map();
    this.#recent = [];
  }
}

/**
 * Seeds `lease`, made for a key `FirstSightings.take` saw first at `seenAtMs`, as if it had been
 * made at that first hit: its demand counts from then, the hit as one request of `cost` (the mark
 * keeps no cost: a hit's own is the best guess, else 1). A lease already seeded, or one that has
 * served a request, is left as it is. Returns `lease`.
 */
export function seededSince(lease: Lease, seenAtMs: number, cost = 1): Lease {
  if (lease.firstCost !== 0) return lease;
  lease.asked = cost;
  lease.requests = 1;
  lease.firstCost = cost;
  lease.lastRefillAtMs = seenAtMs;
  lease.syncedAtMs = seenAtMs;
  return lease;
}
