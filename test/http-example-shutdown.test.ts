/**
 * The example service's limit and its shutdown, over real sockets and a real Redis: a burst on
 * `GET /api/items` from several connections at once is cut at the shared limit, `GET /metrics`
 * reports each worker's limiters, and a SIGINT (what Ctrl-C sends) ends the workers after their
 * two-tier limiter has handed its unspent leased tokens back: read from the bucket in Redis.
 */
import {
  type ExampleService,
  type RedisServer,
  type ServiceReply,
  startExampleService,
  startRedis,
  uniquePrefix,
} from '@tiered-limiter/test-harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBucket } from '../packages/redis/test/stored-bucket.js';

const WORKERS = 2;
/** `ITEMS` of examples/service/src/limits.ts: 20 a second, a burst of 20. */
const ITEMS_CAPACITY = 20;
const ITEMS_PER_SECOND = 20;
/** Requests in flight at once in a burst, and bursts at most: the loop's bound. */
const PARALLEL = 8;
const MAX_BURSTS = 40;

let redis: RedisServer;
let service: ExampleService | undefined;
const prefix = uniquePrefix('example-shutdown');
/** Every request here comes from 127.0.0.1, the key the service limits by. */
const itemsKey = `${prefix}:{127.0.0.1}:items`;

beforeAll(async () => {
  redis = await startRedis();
  service = await startExampleService({ redisUrl: redis.url, workers: WORKERS, prefix });
});

afterAll(async () => {
  await service?.stop('SIGKILL');
  await redis?.stop();
});

/** Unspent leased tokens the bucket in Redis still holds for the items key (0 with no bucket). */
async function heldInRedis(): Promise<number> {
  const bucket = await readBucket(redis.client(), itemsKey);
  return (bucket?.held ?? []).reduce((sum, g) => sum + g.count, 0);
}

describe('example service: the limit bites, shutdown hands leases back', () => {
  it('cuts a burst on GET /api/items at the shared limit, never above capacity + rate × time', async () => {
    const replies: ServiceReply[] = [];
    const started = performance.now();
    for (let burst = 0; burst < MAX_BURSTS && !replies.some((r) => r.status === 429); burst++) {
      const calls = Array.from({ length: PARALLEL }, () => service!.call('/api/items'));
      replies.push(...(await Promise.all(calls)));
    }
    const elapsedS = (performance.now() - started) / 1000;
    const admitted = replies.filter((r) => r.status === 200).length;
    expect(replies.some((r) => r.status === 429)).toBe(true);
    expect(replies.every((r) => r.status === 200 || r.status === 429)).toBe(true);
    // Every admission spent a token leased or taken from the one bucket in Redis.
    expect(admitted).toBeLessThanOrEqual(ITEMS_CAPACITY + Math.ceil(ITEMS_PER_SECOND * elapsedS));
    const denied = replies.find((r) => r.status === 429)!;
    expect(denied.headers['retry-after']).toMatch(/^\d+$/);
    expect(denied.headers['ratelimit-policy']).toBe('"items";q=20;w=1');
  });

  it('GET /metrics answers each worker its own limiters, unlimited', async () => {
    const reply = await service!.call('/metrics');
    expect(reply.status).toBe(200);
    expect(reply.headers['ratelimit-policy']).toBeUndefined();
    const metrics = JSON.parse(reply.body) as Record<string, { allowed: number; denied: number }>;
    expect(metrics.pid).toBe(Number(reply.worker));
    for (const name of ['login', 'items', 'report']) {
      expect(metrics[name]).toMatchObject({ allowed: expect.any(Number), denied: expect.any(Number) });
    }
  });

  it('on SIGINT each worker closes its limiters, and Redis holds no leased token after', async () => {
    // A full bucket again (the burst above emptied it), then leases out: a few admitted requests
    // just before the signal, each worker leasing ahead of its requests (a lease lives 1 s).
    await new Promise((resolve) => setTimeout(resolve, (1000 * ITEMS_CAPACITY) / ITEMS_PER_SECOND + 100));
    await Promise.all(Array.from({ length: PARALLEL }, () => service!.call('/api/items')));
    const heldBefore = await heldInRedis();
    const code = await service!.stop('SIGINT');
    const heldAfter = await heldInRedis();
    const closed = [
      ...service!.output().matchAll(/\] closed: (\d+) unspent leased tokens handed back(.*)$/gm),
    ];
    console.info(
      `held in Redis before SIGINT ${heldBefore}, after ${heldAfter}; workers: ${closed.map((m) => m[0]).join('; ')}`,
    );
    expect(code).toBe(0);
    // Leases were out when the signal came (else this test would show nothing), and none after.
    expect(heldBefore).toBeGreaterThan(0);
    expect(closed).toHaveLength(WORKERS);
    expect(closed.reduce((sum, m) => sum + Number(m[1]), 0)).toBeGreaterThan(0);
    expect(closed.map((m) => m[2])).toEqual(Array(WORKERS).fill('')); // none unreported
    expect(heldAfter).toBe(0);
  });
});
