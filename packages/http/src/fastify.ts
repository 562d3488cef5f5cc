import type { IncomingMessage } from 'node:http';
import { createRateLimitCheck, type RateLimitOptions, type RateLimitOutcome } from './check.js';

/** What the Fastify hook reads of a request: Node's message underneath. */
export interface FastifyRequestLike {
  /** Node's `IncomingMessage`. */
  readonly raw: IncomingMessage;
}

/** What the Fastify hook calls on a reply. */
export interface FastifyReplyLike {
  /** Sets a response header. */
  header(name: string, value: string): unknown;
  /** Sets the status code. */
  code(statusCode: number): unknown;
  /** Sends the response. */
  send(payload?: unknown): unknown;
}

/**
 * A Fastify (5) `onRequest` hook, in callback style: typed without Fastify, so this package
 * needs no Fastify types.
 */
export type RateLimitHook<Req extends FastifyRequestLike = FastifyRequestLike> = (
  request: Req,
  reply: FastifyReplyLike,
  done: (error?: Error) => void,
) => void;

/**
 * Rate limiting as a Fastify (5) `onRequest` hook: for every route with `addHook`, for one
 * route in its `onRequest` option. Sets the rate-limit headers and lets the request go on,
 * or sends the denial itself (429 or 503, `Retry-After`, a problem document). It is a
 * callback hook, so a decision the two-tier limiter makes from its lease costs no promise.
 * An error from `key`, `cost` or a bad cost goes to Fastify's error handler.
 *
 * `key` and `cost` receive Fastify's request (`Req`); the default key and the `routes` table
 * read Node's message under it (`request.raw`).
 *
 * @example
 * import Fastify from 'fastify';
 * import { perSecond } from '@tiered-limiter/core';
 * import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
 * import { fastifyRateLimit } from '@tiered-limiter/http';
 *
 * const limiter = new TieredLimiter({ store: new MemoryStore(), limits: perSecond(100), failurePolicy: 'open' });
 * const app = Fastify();
 * app.addHook('onRequest', fastifyRateLimit({ limiter }));
 * app.get('/items', async () => ({ items: [] }));
 */
export function fastifyRateLimit<Req extends FastifyRequestLike = FastifyRequestLike>(
  options: RateLimitOptions<Req>,
): RateLimitHook<Req> {
  const check = createRateLimitCheck(options);
  return (request, reply, done) => {
    let result: ReturnType<typeof check>;
    try {
      result = check(request, request.raw);
    } catch (error) {
      done(toError(error));
      return;
    }
    if (result instanceof Promise) {
      result.then((outcome) => finish(outcome, reply, done)).catch((error: unknown) => done(toError(error)));
    } else {
      finish(result, reply, done);
    }
  };
}

function finish(
  outcome: RateLimitOutcome | undefined,
  reply: FastifyReplyLike,
  done: (error?: Error) => void,
): void {
  if (outcome === undefined) {
    done();
    return;
  }
  const { headers } = outcome;
  for (const name in headers) reply.header(name, headers[name]!);
  if (outcome.allowed) {
    done();
    return;
  }
  // A hook that sends does not call done(): Fastify then skips the handler. A Buffer, because
  // Fastify would append `; charset=utf-8` to the media type of a string (JSON has no charset).
  reply.code(outcome.status);
  reply.send(Buffer.from(outcome.body));
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
