/**
 * The README's "What a key becomes" table, row by row, on a real Redis: a request on each user key
 * leaves the Redis key the table names (prefix `api`, limit `10ps`), a 17-byte value with nothing on
 * lease, and a TTL of the time until full plus `keepAfterFullMs` (1,000 ms by default) plus 50 ms.
 * keys.test.ts holds the escaping rules; this holds the table a reader copies key names from.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { perSecond } from '@tiered-limiter/core';
import { bucketKey, createRedisLimiter, recommendedRedisOptions } from '@tiered-limiter/redis';
import { whenReady } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { redisForFile } from './src/redis-for-file.js';

const redis = redisForFile();
const README = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');

/** The table's rows: the user key cell and the Redis key cell, backticks dropped. */
function rows(): [string, string][] {
  const section = README.split('### What a key becomes')[1]!.split('\n### ')[0]!;
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const [user, key] = line.split(' | ').map((cell) =>
        cell
          .replace(/^\| |\s*\|$/g, '')
          .trim()
          .replaceAll('`', ''),
      );
      return [user!, key!];
    });
}

describe("the README's table of Redis keys", () => {
  const table = rows();
  // The hashed row stands for two user keys: the empty one and one too long once escaped.
  const hashed = table.find(([user]) => user.startsWith('""'))!;
  const cases: [string, string | RegExp][] = [
    ...table.filter((row) => row !== hashed),
    ['', /^api:\{%#[A-Za-z0-9_-]{43}\}:10ps$/],
    ['x'.repeat(129), /^api:\{%#[A-Za-z0-9_-]{43}\}:10ps$/],
  ];

  it('has the rows the README shows', () => {
    expect(table.map(([user]) => user)).toEqual([
      'user:42',
      '203.0.113.7',
      '{evil}',
      '"", or longer than 128 characters once escaped',
    ]);
    expect(hashed[1]).toBe('api:{%#<base64url SHA-256>}:10ps');
  });

  it.each(cases)(
    '%j becomes %s: 17 bytes with nothing on lease, its TTL until full + 1,000 + 50 ms',
    async (user, named) => {
      const client = redis.client(recommendedRedisOptions);
      await whenReady(client);
      const limiter = createRedisLimiter({
        redis: client,
        prefix: 'api',
        limits: perSecond(10),
        failurePolicy: 'closed',
      });
      const started = performance.now();
      expect((await limiter.consume(user)).allowed).toBe(true);
      await limiter.close();
      const key = typeof named === 'string' ? named : bucketKey('api', user, '10ps');
      if (typeof named !== 'string') expect(key).toMatch(named);
      expect(await client.exists(key)).toBe(1);
      expect(await client.strlen(key)).toBe(17);
      // One token short at 10/s: full in 100 ms. Set when the take ran, read some ms later: the
      // time since the request began is all it can have lost (and a ms of rounding).
      const ttl = await client.pttl(key);
      const elapsed = Math.ceil(performance.now() - started);
      expect(ttl).toBeLessThanOrEqual(100 + 1_000 + 50);
      expect(ttl).toBeGreaterThanOrEqual(100 + 1_000 + 50 - elapsed - 1);
      await client.del(key);
      client.disconnect();
    },
  );
});
