import type { ColdStartConfig } from './fleet-options.js';

/** Slots of the spacing table: keys share a slot by hash, and a collision only withholds optimism. */
const SLOTS = 1 << 16;

/**
 * Optimistic cold start's memory: for a slot of keys (by hash), when this instance last admitted
 * one of them before the store had heard of it. A key starts optimistically at most once per
 * `spacingMs`, which is what bounds the fleet's extra admissions to `N·credit` per spacing.
 */
export class ColdStart {
  readonly credit: number;
  readonly #spacingMs: number;
  readonly #lastUse = new Float64Array(SLOTS).fill(Number.NEGATIVE_INFINITY);

  constructor(config: ColdStartConfig) {
    this.credit = config.credit;
    this.#spacingMs = config.spacingMs;
  }

  /** Whether `key` may start optimistically at `nowMs`; if so, the slot is taken until the spacing ends. */
  claim(key: string, nowMs: number): boolean {
    const slot = fnv1a(key) & (SLOTS - 1);
    if (nowMs - this.#lastUse[slot]! < this.#spacingMs) return false;
    this.#lastUse[slot] = nowMs;
    return true;
  }
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
