import type { IncomingMessage, ServerResponse } from 'node:http';
import { buildCheck, type RateLimitCheck } from './check.js';
import { handlerOption } from './handler.js';
import type { RateLimitDenied, RateLimitOptions } from './options.js';
import { writeOutcome } from './respond.js';

/**
 * An Express (4 or 5) middleware: the signature Express calls, typed without Express, so this
 * package needs no Express types. `Req` is the request `key` and `cost` receive; give
 * Express's `Request` to read `req.ip` or what your own middleware added.
 */
export type RateLimitMiddleware<Req extends IncomingMessage = IncomingMessage> = (
  req: Req,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void;

/** Options of `expressRateLimit`: the common ones, and a `handler` with Express's signature. */
export interface ExpressRateLimitOptions<Req extends IncomingMessage = IncomingMessage>
  extends RateLimitOptions<Req> {
  /**
   * Answers a denial instead of the default (status, problem document), as express-rate-limit's
   * `handler` does. The rate-limit headers are already set; answer with `res`, or call `next`. An
   * async handler's rejection goes to `next(error)`, as a throw does.
   */
  handler?: (req: Req, res: ServerResponse, next: (error?: unknown) => void, denial: RateLimitDenied) => void;
}

/**
 * Rate limiting as Express (4 or 5) middleware. Sets the rate-limit headers and calls `next()`,
 * or answers the denial itself (429 or 503, `Retry-After`, a problem document). A decision the
 * two-tier limiter makes from its lease calls `next()` synchronously, without a promise. An
 * error from `key`, `cost` or a bad cost goes to `next(error)`. When the app has set
 * `trust proxy` and `trustProxy` is 0, the default key is Express's `req.ip`.
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
  options: ExpressRateLimitOptions<Req>,
): RateLimitMiddleware<Req> {
  const handler = handlerOption(options, 'a function (req, res, next, denial) that answers the denial');
  const check: RateLimitCheck<Req> = buildCheck(options, {
    options: ['handler'],
    trustedIp: expressTrustedIp,
    literalPaths: true,
  });
  return (req, res, next) => {
    let result: ReturnType<typeof check>;
    try {
      result = check(req, req);
    } catch (error) {
      next(error);
      return;
    }
    const go = (outcome: Awaited<typeof result>) => {
      if (outcome === undefined) return next();
      const deny =
        handler && !outcome.allowed
          ? () => {
              // An async handler's rejection goes where a throw would: to Express.
              const answered: unknown = handler(req, res, next, outcome);
              if (answered instanceof Promise) answered.catch(next);
            }
          : undefined;
      if (writeOutcome(res, outcome, deny)) next();
    };
    if (result instanceof Promise) result.then(go).catch(next);
    else go(result);
  };
}

/** `req.ip` when the Express app trusts proxies (`app.set('trust proxy', …)`), else `undefined`. */
function expressTrustedIp(req: IncomingMessage): string | undefined {
  const { app, ip } = req as IncomingMessage & { app?: { get?: (name: string) => unknown }; ip?: unknown };
  if (typeof app?.get !== 'function' || !app.get('trust proxy')) return undefined;
  return typeof ip === 'string' && ip !== '' ? ip : undefined;
}
