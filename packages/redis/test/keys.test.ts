import { ConfigError, defineLimit, internal } from '@tiered-limiter/core';
import {
  assertPrefix,
  bucketKey,
  bucketKeys,
  DEFAULT_PREFIX,
  KEY_TTL_MARGIN_MS,
  keyTag,
  MAX_TAG_LENGTH,
  shardOf,
} from '@tiered-limiter/redis';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import bucketLua from '../lua/bucket.lua';
import { SCRIPTS } from '../src/scripts.js';

/** Undoes the escaping of a tag that was not hashed: proof that escaping is injective. */
function unescapeTag(tag: string): string {
  return tag.replace(
    /%u([0-9A-F]{4})|%([0-9A-F]{2})/g,
    (_, wide: string | undefined, byte: string | undefined) =>
      String.fromCharCode(Number.parseInt(wide ?? byte!, 16)),
  );
}

/** Any UTF-16 code unit, lone surrogates included: every string JavaScript can hold. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code));
const anyString = fc.oneof(
  fc.string({ unit: codeUnit, maxLength: 40 }),
  fc.string({
    unit: fc.constantFrom('{', '}', ':', '%', '#', 'a', 'u', '7', 'B', '\u0000', '😀'),
    maxLength: 40,
  }),
  fc.string({ unit: codeUnit, minLength: 100, maxLength: 300 }),
);

describe('keyTag', () => {
  it('keeps a plain key as it is', () => {
    for (const key of ['user-42', 'alice@example.com', '203.0.113.9', 'a'.repeat(128), 'x|y~z']) {
      expect(keyTag(key)).toBe(key);
    }
  });

  it('escapes braces, colons, percent signs, spaces, control and non-ASCII characters', () => {
    expect(keyTag('user:42')).toBe('user%3A42');
    expect(keyTag('{x}')).toBe('%7Bx%7D');
    expect(keyTag('100%')).toBe('100%25');
    expect(keyTag('a b\n')).toBe('a%20b%0A');
    expect(keyTag('é😀')).toBe('%E9%uD83D%uDE00');
    expect(keyTag('::1')).toBe('%3A%3A1');
  });

  it('hashes the empty key and every key too long to keep', () => {
    const hashed = [keyTag(''), keyTag('a'.repeat(129)), keyTag(':'.repeat(43)), keyTag('x'.repeat(10_000))];
    for (const tag of hashed) expect(tag).toMatch(/^%#[A-Za-z0-9_-]{43}$/);
    expect(new Set(hashed).size).toBe(hashed.length);
    expect(keyTag(':'.repeat(42))).toBe('%3A'.repeat(42));
  });

  it('never lets a key choose the slot, reach past its tag, or exceed the bound', () => {
    fc.assert(
      fc.property(anyString, (key) => {
        const tag = keyTag(key);
        expect(tag.length).toBeGreaterThan(0);
        expect(tag.length).toBeLessThanOrEqual(MAX_TAG_LENGTH);
        expect(tag).toMatch(/^[\x21-\x39\x3B-\x7A\x7C\x7E]+$/); // printable ASCII without { } :
        const redisKey = bucketKey('tl', key, 'limit');
        // Cluster hashes what lies between the first `{` and the next `}`: exactly the tag.
        const open = redisKey.indexOf('{');
        expect(redisKey.slice(open + 1, redisKey.indexOf('}', open))).toBe(tag);
        expect(redisKey).toBe(`tl:{${tag}}:limit`);
      }),
      { numRuns: 2000 },
    );
  });

  it('maps different keys to different tags (escaping can be undone; hashes are marked)', () => {
    fc.assert(
      fc.property(anyString, (key) => {
        const tag = keyTag(key);
        // Escaping writes at most 6 characters per code unit: only the empty key or a long one is hashed.
        if (tag.startsWith('%#')) expect(key === '' || key.length * 6 > MAX_TAG_LENGTH).toBe(true);
        else expect(unescapeTag(tag)).toBe(key);
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.uniqueArray(anyString, { minLength: 2, maxLength: 30 }), (keys) => {
        expect(new Set(keys.map(keyTag)).size).toBe(keys.length);
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(anyString, anyString, (a, b) => {
        fc.pre(a !== b);
        expect(keyTag(a)).not.toBe(keyTag(b));
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps apart the keys built to collide', () => {
    const long = 'k'.repeat(200);
    const tricky = [
      ['{', '%7B'],
      ['%7B', '%257B'],
      ['\ud800', '\udc00'],
      ['\ud800', '\ufffd'],
      ['a'.repeat(128), 'a'.repeat(129)],
      ['', keyTag('')],
      [long, keyTag(long)],
      ['\u0000', ''],
      ['é', '%E9'],
    ];
    for (const [a, b] of tricky) expect(keyTag(a!)).not.toBe(keyTag(b!));
  });
});

describe('bucketKeys', () => {
  it('gives every limit of a key its own key, all with the same tag', () => {
    const limits = [
      defineLimit({ capacity: 10, refillPerSecond: 10, name: 'per-second' }),
      defineLimit({ capacity: 1000, refillPerSecond: 1000 / 3600, name: 'per-hour' }),
    ];
    expect(bucketKeys('api', 'user:42', limits)).toEqual([
      'api:{user%3A42}:per-second',
      'api:{user%3A42}:per-hour',
    ]);
    expect(bucketKey(DEFAULT_PREFIX, 'alice', 'per-second')).toBe('tl:{alice}:per-second');
  });
});

describe('virtual shards', () => {
  it('puts the shard in braces and keeps the tag after it: prefix:{s<n>}:tag:limit', () => {
    const limit = defineLimit({ capacity: 10, refillPerSecond: 10, name: 'per-second' });
    const shard = shardOf('user%3A42', 12);
    expect(bucketKeys('api', 'user:42', [limit], 12)).toEqual([`api:{s${shard}}:user%3A42:per-second`]);
    expect(bucketKey('api', 'user:42', 'per-second', 12)).toBe(`api:{s${shard}}:user%3A42:per-second`);
  });

  it('spreads tags evenly, stably, and over 0 … S − 1 only', () => {
    // FNV-1a 32 of "a" is 0xe40c292c: a fixed value, the same in every process and version.
    expect(shardOf('a', 2 ** 31)).toBe(0xe40c292c % 2 ** 31);
    const counts = new Array<number>(8).fill(0);
    for (let i = 0; i < 8000; i++) counts[shardOf(keyTag(`user:${i}`), 8)]!++;
    for (const count of counts) expect(count).toBeGreaterThan(800);
    fc.assert(
      fc.property(anyString, fc.integer({ min: 1, max: 16_384 }), (key, shards) => {
        const shard = shardOf(keyTag(key), shards);
        return Number.isInteger(shard) && shard >= 0 && shard < shards;
      }),
    );
  });

  it('keeps different keys apart: the tag stays whole in the key', () => {
    fc.assert(
      fc.property(anyString, anyString, (a, b) => {
        fc.pre(a !== b);
        return bucketKey('p', a, 'l', 4) !== bucketKey('p', b, 'l', 4);
      }),
    );
  });
});

describe('assertPrefix', () => {
  it('accepts plain prefixes', () => {
    for (const prefix of ['tl', 'my-app:rate', 'a/b.c_d', 'x'.repeat(64)])
      expect(assertPrefix(prefix)).toBe(prefix);
  });

  it('refuses a prefix that could move the hash tag or is empty, long, or not a string', () => {
    for (const prefix of ['', 'a{b', 'a}b', '{x}', 'a b', 'x'.repeat(65), 'é', 5, null, undefined]) {
      expect(() => assertPrefix(prefix)).toThrow(ConfigError);
    }
    expect(() => assertPrefix('a{b')).toThrow(/Expected `prefix` to be 1 to 64 characters/);
  });
});

describe('MAX_WAIT_MS', () => {
  it("is the script's cap on a wait", () => {
    expect(bucketLua).toMatch(new RegExp(`local MAX_MS = ${internal.MAX_WAIT_MS} `));
  });
});

describe('KEY_TTL_MARGIN_MS', () => {
  it('is the margin the script adds to its PEXPIRE', () => {
    expect(bucketLua).toMatch(new RegExp(`local TTL_MARGIN_MS = ${KEY_TTL_MARGIN_MS} `));
    expect(SCRIPTS.apply.startsWith(bucketLua)).toBe(true);
  });
});
