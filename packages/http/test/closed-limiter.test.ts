/**
 * The HTTP README (Shutting down) and the root README (Graceful shutdown): "a request that reaches
 * a closed limiter meets its `ClosedError` (`ERR_TL_CLOSED`): Express and Fastify hand it to their
 * error handling (a 500), and the promise `createRateLimit` returns rejects". A closed limiter is a
 * programmer error, never a denial nor a request let through: the middleware must not turn it into
 * either.
 */
import { ClosedError, defineLimit } from '@tiered-limiter/core';
import { createRateLimit } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';
import { ADAPTERS, closeApps } from './adapters.js';
import { exactTieredLimiter, request } from './helpers.js';

const api = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'api' });

afterEach(() => closeApps());

const LIMITERS = [
  {
    name: 'RequestLimiter',
    make: () => new RequestLimiter({ store: new MemoryStore(), limits: api, failurePolicy: 'open' }),
  },
  // Its hot path throws from tryConsume, before any promise: the middleware must pass that on too.
  { name: 'TieredLimiter', make: () => exactTieredLimiter(api, new FakeClock(0)) },
];

describe.each(ADAPTERS)('a closed limiter behind $name', (adapter) => {
  it.each(LIMITERS)('$name: the request meets ClosedError, a 500, and is not handled', async ({ make }) => {
    const limiter = make();
    const { url, handled } = await adapter.start({ limiter });
    expect((await request(`${url}/items`)).status).toBe(200);
    await limiter.close();

    const reply = await request(`${url}/items`);
    expect(reply.status).toBe(500);
    expect(reply.body).toContain('is closed');
    expect(handled()).toBe(1);
  });
});

describe('createRateLimit on a closed limiter', () => {
  it.each(LIMITERS)('$name: the promise rejects with ClosedError (ERR_TL_CLOSED)', async ({ make }) => {
    const limiter = make();
    await limiter.close();
    const rateLimit = createRateLimit({ limiter });
    const req = { method: 'GET', url: '/items', headers: {}, socket: { remoteAddress: '127.0.0.1' } };
    const res = { setHeader: () => {}, end: () => {}, once: () => {}, on: () => {} };
    const error = await rateLimit(req as never, res as never).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ClosedError);
    expect((error as ClosedError).code).toBe('ERR_TL_CLOSED');
  });
});
