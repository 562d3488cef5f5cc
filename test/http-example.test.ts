/**
 * The example service (examples/service) over real sockets: several cluster workers sharing one
 * real Redis. Needs the built packages (the test command builds first) and a Redis from the harness.
 */
import {
  type ExampleService,
  type RedisServer,
  type ServiceReply as Reply,
  startExampleService,
  startRedis,
  uniquePrefix,
} from '@tiered-limiter/test-harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const WORKERS = 3;
/** Bound on every polling loop below, in attempts; each waits `POLL_PAUSE_MS`. */
const POLL_ATTEMPTS = 100;
const POLL_PAUSE_MS = 100;

let redis: RedisServer;
let service: ExampleService | undefined;

const call = (path: string, method = 'GET') => service!.call(path, method);

async function callMany(count: number, path: string, method = 'GET'): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < count; i++) replies.push(await call(path, method));
  return replies;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Calls until `done` holds, at most `POLL_ATTEMPTS` times; returns every reply. */
async function pollUntil(path: string, method: string, done: (reply: Reply) => boolean): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < POLL_ATTEMPTS; i++) {
    const reply = await call(path, method);
    replies.push(reply);
    if (done(reply)) return replies;
    await pause(POLL_PAUSE_MS);
  }
  throw new Error(`no reply to ${method} ${path} met the condition in ${POLL_ATTEMPTS} attempts`);
}

beforeAll(async () => {
  redis = await startRedis();
  service = await startExampleService({
    redisUrl: redis.url,
    workers: WORKERS,
    prefix: uniquePrefix('http-example'),
  });
});

afterAll(async () => {
  await service?.stop();
  await redis?.stop();
});

describe('example service over HTTP, several processes, one Redis', () => {
  it('answers from several worker processes', async () => {
    const replies = await callMany(WORKERS * 4, '/health');
    expect(replies.every((r) => r.status === 200)).toBe(true);
    expect(new Set(replies.map((r) => r.worker)).size).toBeGreaterThan(1);
    expect(replies[0]!.headers).toEqual({ 'content-type': 'application/json' });
  });

  it('refuses the 6th login at the shared limit of 5, not before, with the right headers', async () => {
    const replies = await callMany(6, '/login', 'POST');
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
    // Served by more than one process: the limit is shared through Redis.
    expect(new Set(replies.map((r) => r.worker)).size).toBeGreaterThan(1);
    for (const [i, reply] of replies.entries()) {
      expect(reply.headers['ratelimit-policy']).toBe('"login";q=5;w=60');
      const [, r, t] = /^"login";r=(\d+);t=(\d+)$/.exec(reply.headers.ratelimit ?? '') ?? [];
      // 5 per minute is one token per 12 s, and t is the time until the next one: 12 s after each
      // login, less the few ms the requests took. The denial's t is its Retry-After.
      expect(Number(r)).toBe(i < 5 ? 4 - i : 0);
      expect(Number(t)).toBeGreaterThanOrEqual(11);
      expect(Number(t)).toBeLessThanOrEqual(12);
    }
    const denied = replies[5]!;
    expect(denied.headers['content-type']).toBe('application/problem+json');
    expect(denied.headers['retry-after']).toBe(/t=(\d+)$/.exec(denied.headers.ratelimit!)![1]);
    expect(JSON.parse(denied.body)).toMatchObject({
      type: 'about:blank',
      title: 'Too Many Requests',
      status: 429,
    });
  });

  it('charges a report by its weight, and admits it again once Retry-After has passed', async () => {
    const big = await call('/api/report?days=70'); // 10 units: the whole burst
    expect(big.status).toBe(200);
    expect(big.headers['ratelimit-policy']).toBe('"report";q=10;w=10');
    expect(big.headers.ratelimit).toBe('"report";r=0;t=1'); // the next unit in 1 s

    const refused = await call('/api/report?days=7'); // 1 unit, 1 per second
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.headers.ratelimit).toBe('"report";r=0;t=1');

    await pause(Number(refused.headers['retry-after']) * 1000);
    const again = await call('/api/report?days=7');
    expect(again.status).toBe(200);
    expect(JSON.parse(again.body)).toEqual({ days: 7, cost: 1, rows: 7 });
  });

  it('announces the general route and its remaining quota', async () => {
    const reply = await call('/api/items');
    expect(reply.status).toBe(200);
    expect(reply.headers['ratelimit-policy']).toBe('"items";q=20;w=1');
    expect(reply.headers.ratelimit).toMatch(/^"items";r=\d+;t=[01]$/);
    expect(reply.headers['ratelimit-degraded']).toBeUndefined();
  });

  it('with Redis stopped, refuses logins (fail closed) and admits the general route (fail open)', async (ctx) => {
    if (redis.source === 'env') ctx.skip(); // an external Redis cannot be stopped from here
    await redis.kill();

    const logins = await callMany(WORKERS * 2, '/login', 'POST');
    for (const reply of logins) {
      expect(reply.status).toBe(503);
      expect(reply.headers).toMatchObject({
        'ratelimit-policy': '"login";q=5;w=60',
        'ratelimit-degraded': 'policy=closed',
        'retry-after': '1',
        'content-type': 'application/problem+json',
      });
      expect(reply.headers.ratelimit).toBeUndefined();
    }

    // Leased tokens may still admit for up to a lease's life; then the open policy does, and says so.
    const items = await pollUntil(
      '/api/items',
      'GET',
      (r) => r.headers['ratelimit-degraded'] === 'policy=open',
    );
    expect(items.every((r) => r.status === 200)).toBe(true);

    await redis.restart();
    const back = await pollUntil('/login', 'POST', (r) => r.status === 200);
    expect(back.at(-1)!.headers['ratelimit-degraded']).toBeUndefined();
    // The outage is told by the limiters' `degraded` and `recovered` events (when a breaker opens:
    // this short outage may open none), not by a stack trace per failed reconnect from a client with
    // no `error` listener.
    expect(service!.output()).not.toMatch(/Unhandled error event/);
  });
});
