import { ArgumentError } from '@tiered-limiter/core';
import { bucketKey, bucketKeys, MAX_SHARDS, shardOf } from '@tiered-limiter/redis';
import { describe, expect, it } from 'vitest';

describe('shards given to the key layout functions', () => {
  it.each([0, -3, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '8'])(
    'refuses %s by an ArgumentError naming shards, rather than a key no store writes',
    (shards) => {
      for (const call of [
        () => shardOf('user', shards as number),
        () => bucketKey('tl', 'user', 'api', shards as number),
        () => bucketKeys('tl', 'user', [], shards as number),
      ]) {
        expect(call).toThrow(ArgumentError);
        expect(call).toThrow(/shards/);
      }
    },
  );

  it('takes 1 to MAX_SHARDS, and none', () => {
    expect(shardOf('user', 1)).toBe(0);
    expect(shardOf('user', MAX_SHARDS)).toBeLessThan(MAX_SHARDS);
    expect(bucketKey('tl', 'user', 'api', 8)).toMatch(/^tl:\{s\d\}:user:api$/);
    expect(bucketKey('tl', 'user', 'api')).toBe('tl:{user}:api');
  });
});
