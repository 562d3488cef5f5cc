/**
 * Concurrent clients on one key, on a real Redis server: why the bucket step runs inside Redis.
 */
import { defineLimit } from '@tiered-limiter/core';
import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
import { type RedisServer, startRedis, uniquePrefix, whenReady } from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const CLIENTS = 8;
const ROUNDS = 10;

let server: RedisServer;
let clients: Redis[];

beforeAll(async () => {
  server = await startRedis();
  clients = Array.from({ length: CLIENTS }, () => server.client(recommendedRedisOptions));
  await Promise.all(clients.map((c) => whenReady(c)));
});

afterAll(() => server.stop());

/** The read-modify-write a limiter without a script would do: GET, decide in JS, SET. */
async function naiveTake(client: Redis, key: string): Promise<boolean> {
  const tokens = Number(await client.get(key));
  if (tokens < 1) return false;
  await client.set(key, String(tokens - 1));
  return true;
}

describe('several clients, one key, one token left', () => {
  it('a GET-then-SET in JavaScript admits more than one', async () => {
    const prefix = uniquePrefix('naive');
    const admitted: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const key = `${prefix}:${round}`;
      await clients[0]!.set(key, '1');
      const results = await Promise.all(clients.map((c) => naiveTake(c, key)));
      admitted.push(results.filter(Boolean).length);
      if (admitted.at(-1)! > 1) break;
    }
    expect(Math.max(...admitted)).toBeGreaterThan(1);
  });

  it('the script admits exactly one, every round', async () => {
    const limit = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'one-left' });
    const prefix = uniquePrefix('script');
    const stores = clients.map((redis) => new RedisStore({ redis, prefix }));
    for (let round = 0; round < ROUNDS; round++) {
      const user = `user-${round}`;
      expect(await stores[0]!.apply({ key: user, limits: [limit], take: 9 })).toMatchObject({
        ok: true,
        remaining: 1,
      });
      const replies = await Promise.all(
        stores.map((store) => store.apply({ key: user, limits: [limit], take: 1 })),
      );
      expect(replies.filter((r) => r.ok)).toHaveLength(1);
    }
  });
});

describe('8 connections hammering one bucket that does not refill during the test', () => {
  it('admits exactly its capacity', async () => {
    // 1,000 tokens, one more every 1,000 s: less than 0.01 of a token during the test.
    const limit = defineLimit({ capacity: 1000, refillPerSecond: 0.001, name: 'hammer' });
    const prefix = uniquePrefix('hammer');
    const perClient = 200; // 1,600 calls in all for 1,000 tokens
    const inFlight = 4;
    let admitted = 0;
    let denied = 0;
    await Promise.all(
      clients.map(async (redis) => {
        const store = new RedisStore({ redis, prefix });
        for (let sent = 0; sent < perClient; sent += inFlight) {
          const replies = await Promise.all(
            Array.from({ length: inFlight }, () => store.apply({ key: 'hot', limits: [limit], take: 1 })),
          );
          for (const reply of replies) {
            if (reply.ok) admitted++;
            else denied++;
          }
        }
      }),
    );
    expect(admitted).toBe(1000);
    expect(denied).toBe(CLIENTS * perClient - 1000);
    const store = new RedisStore({ redis: clients[0]!, prefix });
    expect((await store.apply({ key: 'hot', limits: [limit] })).remaining).toBe(0);
  });
});
