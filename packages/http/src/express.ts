import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRateLimitCheck, type RateLimitOptions } from './check.js';
import { writeOutcome } from './node-http.js';

/**
 * An Express (5) middleware: the signature Express calls, typed without Express, so this
 * package needs no Express types. `Req` is the request `key` and `cost` receive; give
 * Express's `Request` to read `req.ip` or what your own middleware added.
 */
export type RateLimitMiddleware<Req extends IncomingMessage = IncomingMessage> = (
  req: Req,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void;

/**
 * Rate limiting as Express (5) middleware. Sets the rate-limit headers and calls `next()`, or
 * answers the denial itself (429 or 503, `Retry-After`, a problem document). A decision the
 * two-tier limiter makes from its lease calls `next()` synchronously, without a promise. An
 * error from `key`, `cost` or a bad cost goes to `next(error)`.
 *
 * Mounted on one route (`app.post('/login', limit, handler)`) it limits exactly what Express
 * routes there; with `app.use` and `routes`, see `RouteLimits` for how paths are compared.
 *
 * @example
 * import express from 'express';
 * import { perMinute } from '@tiered-limiter/core';
 * import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
 * import { expressRateLimit } from '@tiered-limiter/http';
 *
 * const login = new RequestLimiter({ store: new MemoryStore(), limits: perMinute(5, { name: 'login' }), failurePolicy: 'closed' });
 * const app = express();
 * app.post('/login', expressRateLimit({ limiter: login }), (req, res) => { res.send('welcome'); });
 */
export function expressRateLimit<Req extends IncomingMessage = IncomingMessage>(
  options: RateLimitOptions<Req>,
): RateLimitMiddleware<Req> {
  const check = createRateLimitCheck(options);
  return (req, res, next) => {
    let result: ReturnType<typeof check>;
    try {
      result = check(req, req);
    } catch (error) {
      next(error);
      return;
    }
    if (result instanceof Promise) {
      result
        .then((outcome) => {
          if (outcome === undefined || writeOutcome(res, outcome)) next();
        })
        .catch(next);
    } else if (result === undefined || writeOutcome(res, result)) {
      next();
    }
  };
}
