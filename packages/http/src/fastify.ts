import type { IncomingMessage, ServerResponse } from 'node:http';
import { buildCheck } from './check.js';
import { handlerOption } from './handler.js';
import type { RateLimitDenied, RateLimitOptions, RateLimitOutcome } from './options.js';
import { settleOnClose } from './respond.js';

/** What the Fastify hook reads of a request: Node's message underneath, and the route's config. */
export interface FastifyRequestLike {
  /** Node's `IncomingMessage`. */
  readonly raw: IncomingMessage;
  /** The client address Fastify computed, by its own `trustProxy` setting. */
  readonly ip?: string;
  /** The forwarded chain Fastify believed; Fastify defines it only when its `trustProxy` is set. */
  readonly ips?: readonly string[];
  /** The route's options; `config.rateLimit` gives a route its own limit (or `false`: none). */
  readonly routeOptions?: {
    /** The route's `config`, where `config.rateLimit` sets or turns off its limit. */
    readonly config?: unknown;
  };
}

/** What the Fastify hook calls on a reply. */
export interface FastifyReplyLike {
  /** Node's `ServerResponse`, watched for `skipFailedRequests`/`skipSuccessfulRequests`. */
  readonly raw: ServerResponse;
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

/** Options of `fastifyRateLimit`: the common ones, and a `handler` with Fastify's signature. */
export interface FastifyRateLimitOptions<Req extends FastifyRequestLike = FastifyRequestLike>
  extends RateLimitOptions<Req> {
  /**
   * Answers a denial instead of the default (status, problem document). The rate-limit headers
   * are already set on the reply; the handler must send it.
   */
  handler?: (request: Req, reply: FastifyReplyLike, denial: RateLimitDenied) => void;
}

/**
 * Rate limiting as a Fastify (5) `onRequest` hook: for every route with `addHook`, for one
 * route in its `onRequest` option. Sets the rate-limit headers and lets the request go on,
 * or sends the denial itself (429 or 503, `Retry-After`, a problem document). It is a
 * callback hook, so a decision the two-tier limiter makes from its lease costs no promise.
 * An error from `key`, `cost` or a bad cost goes to Fastify's error handler.
 *
 * A route's `config.rateLimit` overrides the hook's limit for that route, as @fastify/rate-limit's
 * does: `{ limiter }` or `{ limit }` (with `createLimiter`), with optional `cost` and `key`; or
 * `false` for none. Without `limiter`, `limit` or `routes`, only routes with a config are limited.
 *
 * `key` and `cost` receive Fastify's request (`Req`); the `routes` table reads Node's message
 * under it (`request.raw`). When the Fastify app was created with `trustProxy` and this hook's
 * `trustProxy` is 0, the default key and `allowList` read Fastify's `request.ip`, as
 * @fastify/rate-limit's default key does; a `trustProxy` of ours above 0 wins over Fastify's.
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
  options: FastifyRateLimitOptions<Req>,
): RateLimitHook<Req> {
  const handler = handlerOption(options, 'a function (request, reply, denial) that sends the denial');
  const check = buildCheck(options, {
    options: ['handler'],
    literalPaths: true,
    trustedIp: fastifyTrustedIp,
    routeConfig: (request) =>
      (request.routeOptions?.config as { rateLimit?: unknown } | undefined)?.rateLimit,
  });
  return (request, reply, done) => {
    let result: ReturnType<typeof check>;
    try {
      result = check(request, request.raw);
    } catch (error) {
      done(toError(error));
      return;
    }
    const finish = (outcome: RateLimitOutcome | undefined) => {
      if (outcome === undefined) return done();
      const { headers } = outcome;
      for (const name in headers) reply.header(name, headers[name]!);
      if (outcome.allowed) {
        if (outcome.settle !== undefined) settleOnClose(reply.raw, outcome.settle);
        return done();
      }
      // A hook that sends does not call done(): Fastify then skips the handler.
      if (handler !== undefined) {
        // An async handler's rejection goes where a throw would: to Fastify.
        const answered: unknown = handler(request, reply, outcome);
        if (answered instanceof Promise) answered.catch((error: unknown) => done(toError(error)));
        return;
      }
      // A Buffer, because Fastify would append `; charset=utf-8` to the media type of a string
      // (JSON has no charset).
      reply.code(outcome.status);
      reply.send(Buffer.from(outcome.body));
    };
    if (result instanceof Promise) {
      result.then(finish).catch((error: unknown) => done(toError(error)));
    } else {
      try {
        finish(result);
      } catch (error) {
        done(toError(error));
      }
    }
  };
}

/**
 * `request.ip` when the Fastify app trusts a proxy that forwarded this request, else `undefined`.
 * Fastify defines `ips` (the peer, then each forwarded hop it believed) only on the request of an
 * app created with `trustProxy`. When it believed no hop (no header, a peer it does not trust, or
 * a hop count, which Fastify 5.12.1 and later trust nothing from) `request.ip` is the peer's
 * address, which `clientIp` reads too, and warns of an `X-Forwarded-For` nothing believed.
 */
function fastifyTrustedIp(request: FastifyRequestLike): string | undefined {
  if (!('ips' in request)) return undefined;
  const { ips } = request;
  if (!Array.isArray(ips) || ips.length < 2) return undefined;
  const ip: unknown = ips[ips.length - 1];
  return typeof ip === 'string' && ip !== '' ? ip : undefined;
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
