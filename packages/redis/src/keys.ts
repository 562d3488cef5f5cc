import { createHash } from 'node:crypto';
import { ArgumentError, ConfigError, type LimitSpec } from '@tiered-limiter/core';

/** What every key of a `RedisStore` starts with unless its `prefix` option says otherwise. */
export const DEFAULT_PREFIX = 'tl';

/** Longest user key, once escaped, kept readable in a Redis key; a longer one is hashed. */
export const MAX_TAG_LENGTH = 128;

/**
 * Milliseconds a bucket's key outlives the moment its bucket would be full. The scripts set
 * `PEXPIRE` to the time until full plus this margin (`TTL_MARGIN_MS` in `lua/*.lua`, kept equal
 * by a test).
 *
 * Why a margin at all: expiring early is the one harm (the bucket jumps to full, a gift of at
 * most the shortfall × the rate in tokens); expiring late only costs memory. Inside a script,
 * Redis 7 counts `PEXPIRE` from the script's start, a little before the script read `TIME`, so
 * an exact TTL could fire a few µs early; on a loaded host, ms. Rounding the time up to whole
 * ms covers part of that, the margin the rest.
 *
 * Why 50 ms: it guards against expiring early, nothing more. How long a key stays once its
 * bucket is full is a choice of its own, `keepAfterFullMs` (`DEFAULT_KEEP_AFTER_FULL_MS`).
 */
export const KEY_TTL_MARGIN_MS = 50;

/**
 * Milliseconds a bucket's key is kept once its bucket is full, by default (`RedisStore`'s
 * `keepAfterFullMs`): its TTL is the time until full, plus this, plus `KEY_TTL_MARGIN_MS`.
 *
 * Why keep a full bucket at all: a key that expires between two visits costs Redis a delete in
 * its expiry cycle, and that cycle blocks every client while it runs. Keys that filled again
 * 150 ms after each take and came back every half second made one expiry per request: at 137 k
 * a second (100,000 keys in turn, `RequestLimiter`), the cycle ran to its 25 ms cap every
 * 100 ms, and another client's PING waited 13–16 ms at p99 (0.4–0.6 ms idle); with keys kept a
 * second, 0.7–2.4 ms. A kept key costs its next visit a read and an overwrite instead: about
 * 7 % more Redis CPU per decision there. Why a second, not a minute: resident keys grow by the
 * rate of new keys times it.
 */
export const DEFAULT_KEEP_AFTER_FULL_MS = 1000;

/** Most `keepAfterFullMs`: a day. */
export const MAX_KEEP_AFTER_FULL_MS = 86_400_000;

const PREFIX_PATTERN = /^[A-Za-z0-9_.:/-]{1,64}$/;

/**
 * Printable ASCII (`!` to `~`) except `%` (the escape), `:` (ends the tag in a key), `{` and
 * `}` (Cluster's hash-tag braces): a user key made only of these, 1 to 128 of them, is its own tag.
 */
const PLAIN_TAG = /^[\x21-\x24\x26-\x39\x3B-\x7A\x7C\x7E]{1,128}$/;
/** Marks a hashed tag. Escaping never writes `%#` (a `%` it writes is followed by hex or `u`). */
const HASHED_MARK = '%#';

/**
 * Checks a store's key prefix: 1 to 64 of `A-Z a-z 0-9 _ . : / -`. No braces, so the user's tag
 * is the first `{…}` of every key and alone decides its Cluster slot.
 */
export function assertPrefix(prefix: unknown): string {
  if (typeof prefix !== 'string' || !PREFIX_PATTERN.test(prefix)) {
    throw new ConfigError('prefix', prefix, '1 to 64 characters of A-Z, a-z, 0-9, _, ., :, / or -');
  }
  return prefix;
}

/**
 * The hash tag a user key becomes: the part between braces in its Redis keys. It is
 * - the key itself, when that is 1 to 128 printable ASCII characters other than `{ } : %`;
 * - else the key escaped, when that is 1 to 128 characters: each other UTF-16 code unit below
 *   0x100 as `%XX`, any other as `%uXXXX` (so `a:b` becomes `a%3Ab`, `{x}` becomes `%7Bx%7D`);
 * - else (the empty key, or a long one) `%#` and the base64url SHA-256 of the key's UTF-16
 *   code units: 45 characters.
 *
 * So a user key can neither pick the Cluster slot (no braces) nor reach past its tag (no `:`),
 * and two different keys never share a tag: escaping can be undone, and a hashed tag starts with
 * `%#`, which escaping never writes. The tag is pure ASCII, so even a lone surrogate survives the
 * trip to Redis (UTF-8 would turn every lone surrogate into the same U+FFFD).
 */
export function keyTag(key: string): string {
  if (PLAIN_TAG.test(key)) return key;
  if (key.length > 0 && key.length <= MAX_TAG_LENGTH) {
    const escaped = escapeKey(key);
    if (escaped.length <= MAX_TAG_LENGTH) return escaped;
  }
  return HASHED_MARK + createHash('sha256').update(key, 'utf16le').digest('base64url');
}

/**
 * The Redis key of one limit's bucket: `prefix:{tag}:limitName`, or with `shards`,
 * `prefix:{s<n>}:tag:limitName` where `n` is `shardOf(tag, shards)`.
 */
export function bucketKey(prefix: string, key: string, limitName: string, shards?: number): string {
  return keyHead(prefix, key, shards) + limitName;
}

/** The Redis keys of every limit of `key`, in the order of `limits`; all in one Cluster slot. */
export function bucketKeys(
  prefix: string,
  key: string,
  limits: readonly LimitSpec[],
  shards?: number,
): string[] {
  const head = keyHead(prefix, key, shards);
  const keys = new Array<string>(limits.length);
  for (let i = 0; i < limits.length; i++) keys[i] = head + limits[i]!.name;
  return keys;
}

/**
 * The virtual shard, 0 to `shards − 1`, of a tag: FNV-1a (32 bits) of its characters, modulo
 * `shards`. Stable across processes and versions, so every instance puts a key in the same shard.
 */
export function shardOf(tag: string, shards: number): number {
  // An operator's `bucketKey(prefix, key, name, 0)` read `prefix:{sNaN}:…`, a key no store writes;
  // a store's own `shards` was checked at construction, so this costs its ops a comparison.
  // The hash itself takes any modulus (a store allows 1 to MAX_SHARDS; keys.test.ts checks 2^31).
  if (!Number.isSafeInteger(shards) || shards < 1) {
    throw new ArgumentError('shards', shards, 'a whole number from 1');
  }
  let hash = 0x811c9dc5;
  for (let i = 0; i < tag.length; i++) {
    hash ^= tag.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % shards;
}

function keyHead(prefix: string, key: string, shards: number | undefined): string {
  const tag = keyTag(key);
  // The tag keeps its place after the shard: it has no braces or colons, so the key stays
  // injective and the shard alone decides the slot.
  return shards === undefined ? `${prefix}:{${tag}}:` : `${prefix}:{s${shardOf(tag, shards)}}:${tag}:`;
}

/** Whether a UTF-16 code unit stands for itself in a tag: `PLAIN_TAG`'s characters. */
function isPlain(code: number): boolean {
  return code >= 0x21 && code <= 0x7e && code !== 0x25 && code !== 0x3a && code !== 0x7b && code !== 0x7d;
}

/** `%XX` for each code unit below 0x100. */
const BYTE_ESCAPES = Array.from(
  { length: 256 },
  (_, code) => `%${code.toString(16).toUpperCase().padStart(2, '0')}`,
);

// Runs of plain characters are copied as slices, not a character and a regex test at a time: every
// `RequestLimiter` decision on a key like `user:42` escapes it (`keyTag('user:42')` took 164 ns so,
// 52 ns now).
function escapeKey(key: string): string {
  let out = '';
  let run = 0;
  for (let i = 0; i < key.length; i++) {
    const code = key.charCodeAt(i);
    if (isPlain(code)) continue;
    out += key.slice(run, i);
    out += code < 0x100 ? BYTE_ESCAPES[code]! : `%u${code.toString(16).toUpperCase().padStart(4, '0')}`;
    run = i + 1;
  }
  return run === 0 ? key : out + key.slice(run);
}
