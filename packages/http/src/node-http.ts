import type { IncomingMessage, ServerResponse } from 'node:http';
import { buildCheck } from './check.js';
import { handlerOption } from './handler.js';
import type { RateLimitDenied, RateLimitOptions } from './options.js';
import { writeOutcome } from './respond.js';

/** Options of `createRateLimit`: the common ones, and a `handler` with Node's signature. */
export interface NodeRateLimitOptions extends RateLimitOptions<IncomingMessage> {
  /**
   * Answers a denial instead of the default (status, problem document). The rate-limit headers
   * are already set; the handler must end the response.
   */
  handler?: (req: IncomingMessage, res: ServerResponse, denial: RateLimitDenied) => void;
}

/**
 * Rate limiting for Node's `http` server, or anything that hands over Node's request and
 * response. The function it returns checks a request, sets the rate-limit headers, and on a
 * denial writes the whole answer (429 or 503, `Retry-After`, a problem document) and ends it.
 * It resolves whether the request may go on. A limiter never rejects for a store failure; a
 * `key` or `cost` function that throws, or a bad cost, rejects the promise.
 *
 * @example
 * import { createServer } from 'node:http';
 * import { perSecond } from '@tiered-limiter/core';
 * import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
 * import { createRateLimit } from '@tiered-limiter/http';
 *
 * const limiter = new RequestLimiter({ store: new MemoryStore(), limits: perSecond(10), failurePolicy: 'open' });
 * const rateLimit = createRateLimit({ limiter });
 * createServer(async (req, res) => {
 *   if (!(await rateLimit(req, res))) return;
 *   res.end('hello');
 * }).listen(3000, '127.0.0.1');
 */
export function createRateLimit(
  options: NodeRateLimitOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const handler = handlerOption(options, 'a function (req, res, denial) that answers the denial');
  const check = buildCheck(options, { options: ['handler'] });
  return async (req, res) => {
    const outcome = await check(req, req);
    if (outcome === undefined) return true;
    // An async handler is awaited, so that its rejection rejects this promise, as a throw would.
    let answered: unknown;
    const goOn = writeOutcome(
      res,
      outcome,
      handler && !outcome.allowed ? () => (answered = handler(req, res, outcome)) : undefined,
    );
    if (answered instanceof Promise) await answered;
    return goOn;
  };
}
