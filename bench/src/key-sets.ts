/** The keys a row's requests go to, in the order they come. */

import { seededRandom } from '@tiered-limiter/test-harness';

export const MANY_KEYS = 100_000;

/** `hot`: one key; `many`: 100,000 keys taken in turn; `zipf`: 100,000 keys drawn by Zipf's law. */
export type KeySet = 'hot' | 'many' | 'zipf';

export const KEY_LABEL: Readonly<Record<KeySet, string>> = {
  hot: '1 hot key',
  many: '100k keys',
  zipf: '100k keys Zipf',
};

/** Draws in the Zipf sequence: long enough that the loop does not visibly repeat it in a row. */
const ZIPF_DRAWS = 1 << 20;
/** Zipf's exponent: about what per-user and per-IP request counts follow. */
const ZIPF_EXPONENT = 1;
/** The Zipf rows check the bound on their hottest keys: `user:0` … `user:(n−1)`. */
export const ZIPF_CHECKED_KEYS = 10;

let many: string[] | undefined;
let zipf: string[] | undefined;

/** The key sequence of a set (made once per process; the same for every row). */
export function keysOf(set: KeySet): readonly string[] {
  if (set === 'hot') return ['user:1'];
  many ??= Array.from({ length: MANY_KEYS }, (_, i) => `user:${i}`);
  if (set === 'many') return many;
  zipf ??= zipfSequence(many, ZIPF_DRAWS, ZIPF_EXPONENT, 0x5eed);
  return zipf;
}

/**
 * `draws` keys drawn from `keys` with P(rank k) ∝ 1 / k^s (rank 1 is `keys[0]`), by inverse
 * transform on the cumulative weights, from a seeded generator: every run and every row sees
 * the same sequence. With s = 1 over 100,000 keys the hottest key gets 8 % of the requests, the
 * hottest 400 half of them, and most keys come once in a long while.
 */
export function zipfSequence(
  keys: readonly string[],
  draws: number,
  exponent: number,
  seed: number,
): string[] {
  const cumulative = new Float64Array(keys.length);
  let total = 0;
  for (let k = 0; k < keys.length; k++) {
    total += 1 / (k + 1) ** exponent;
    cumulative[k] = total;
  }
  const random = seededRandom(seed);
  const out = new Array<string>(draws);
  for (let i = 0; i < draws; i++) {
    const u = random() * total;
    let lo = 0;
    let hi = keys.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    out[i] = keys[lo]!;
  }
  return out;
}
