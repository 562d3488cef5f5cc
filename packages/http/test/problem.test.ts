import { denyDecision, perSecond } from '@tiered-limiter/core';
import { createRateLimitCheck, defaultProblem } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';

const decision = denyDecision(2000, 0, 2000, perSecond(1, { name: 'api' }), 'global');

describe('defaultProblem', () => {
  it("titles an about:blank document with its status's reason phrase (RFC 9457 §4.2.1)", () => {
    const titleOf = (status: number) => defaultProblem({ decision, status, retryAfterSeconds: 2 }).title;
    expect([429, 503, 403, 418].map(titleOf)).toEqual([
      'Too Many Requests',
      'Service Unavailable',
      'Forbidden',
      "I'm a Teapot",
    ]);
    // A status with no reason phrase gets no title, rather than another status's.
    expect(
      JSON.parse(JSON.stringify(defaultProblem({ decision, status: 599, retryAfterSeconds: 2 }))),
    ).toEqual({
      type: 'about:blank',
      status: 599,
      detail: 'Too many requests; retry in 2 s.',
    });
  });

  it('is the body of a denial under statusCode', async () => {
    const limiter = new RequestLimiter({
      store: new MemoryStore(),
      limits: perSecond(1),
      failurePolicy: 'open',
    });
    const check = createRateLimitCheck({ limiter, key: () => 'k', statusCode: 403 });
    const req = {} as never;
    await check(req, req);
    const outcome = await check(req, req);
    await limiter.close();
    expect(outcome).toMatchObject({ allowed: false, status: 403 });
    expect(JSON.parse((outcome as { body: string }).body)).toMatchObject({ title: 'Forbidden', status: 403 });
  });
});
