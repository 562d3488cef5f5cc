import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRateLimitCheck, type RateLimitOptions, type RateLimitOutcome } from './check.js';

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
  options: RateLimitOptions<IncomingMessage>,
): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const check = createRateLimitCheck(options);
  return async (req, res) => {
    const outcome = await check(req, req);
    return outcome === undefined || writeOutcome(res, outcome);
  };
}

/**
 * Writes an outcome of `createRateLimitCheck` to a Node response: the headers, and on a
 * denial the status and body, ending the response. Returns whether the request may go on.
 */
export function writeOutcome(res: ServerResponse, outcome: RateLimitOutcome): boolean {
  const { headers } = outcome;
  for (const name in headers) res.setHeader(name, headers[name]!);
  if (outcome.allowed) return true;
  res.statusCode = outcome.status;
  res.setHeader('Content-Length', Buffer.byteLength(outcome.body));
  res.end(outcome.body);
  return false;
}
