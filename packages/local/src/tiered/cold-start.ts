import type { LimitSpec } from '@tiered-limiter/core';
import { type ColdStartConfig, coldStartUnder } from './fleet-options.js';

/** Slots of the spacing table: keys share a slot by hash, and a collision only withholds optimism. */
const SLOTS = 1 << 16;

/**
 * Optimistic cold start's memory of which keys started optimistically lately. A key starts so at
 * most once per `spacingMs` on this instance, which is what bounds the fleet's extra admissions to
 * `N·credit` per spacing. While the key's lease is in the table the lease remembers when
 * (`Lease.claimedAtMs`), and a key with a lease never starts optimistically; a lease that leaves
 * within its spacing writes the time into a table of slots by hash. Written on every start, the
 * table refused a third to a half of a burst's new keys (each slot taken for a spacing), and each
 * refused key waited on a take.
 */
export class ColdStart {
  readonly credit: number;
  #config: ColdStartConfig;
  readonly #lastUse = new Float64Array(SLOTS).fill(Number.NEGATIVE_INFINITY);
  /**
   * Since when the fleet has been known, unbroken, to be within the declared instances
   * (`FleetRegistry.creditSince`), or `undefined` when it is not now.
   */
  readonly #creditSince: (nowMs: number) => number | undefined;

  constructor(config: ColdStartConfig, creditSince: (nowMs: number) => number | undefined) {
    this.credit = config.credit;
    this.#config = config;
    this.#creditSince = creditSince;
  }

  /**
   * Whether `key`, which has no lease here, may start optimistically at `nowMs`: its spacing is
   * over, and the fleet has been known to be no larger than declared for a spacing at least. The
   * bound's `N·credit` counts the declared instances; an autoscaled fleet past them would add a
   * credit per instance more, and an instance that took over from one that had just given credit
   * (a restart) would give the key a second credit within the spacing.
   */
  mayStart(key: string, nowMs: number): boolean {
    if (nowMs - this.#lastUse[slotOf(key)]! < this.#config.spacingMs) return false;
    const since = this.#creditSince(nowMs);
    return since !== undefined && nowMs - since >= this.#config.spacingMs;
  }

  /**
   * New limits weighed against the rule before anything changes: throws a `ConfigError` naming
   * the option they break, else returns what puts them in force here (a default spacing follows
   * the limits, as at construction).
   */
  weigh(limits: readonly LimitSpec[]): () => void {
    const next = coldStartUnder(this.#config, limits);
    return () => {
      this.#config = next;
    };
  }

  /** `key`'s lease leaves the table at `nowMs`: a start within the spacing is remembered by slot. */
  left(key: string, claimedAtMs: number, nowMs: number): void {
    if (nowMs - claimedAtMs >= this.#config.spacingMs) return;
    const slot = slotOf(key);
    if (claimedAtMs > this.#lastUse[slot]!) this.#lastUse[slot] = claimedAtMs;
  }
}

function slotOf(key: string): number {
  return fnv1a(key) & (SLOTS - 1);
}

/** 32-bit FNV-1a over the key's UTF-16 code units: cheap, and spreads similar keys apart. */
function fnv1a(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
