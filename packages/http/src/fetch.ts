import { ConfigError } from '@tiered-limiter/core';
import { buildCheck } from './check.js';
import { UNKNOWN_CLIENT_KEY } from './defaults.js';
import { handlerOption } from './handler.js';
import type { RateLimitHeaders } from './headers.js';
import type { RateLimitAllowed, RateLimitDenied, RateLimitInfo, RateLimitOptions } from './options.js';
import type { RawRequest } from './raw-request.js';
import { warnOnce } from './warn.js';

/** Options of `fetchRateLimit`: the common ones, and a `handler` that answers a denial with a `Response`. */
export interface FetchRateLimitOptions extends RateLimitOptions<Request> {
  /**
   * Answers a denial instead of the default (status, problem document). The rate-limit headers,
   * `Retry-After` among them, are added to the `Response` it returns, where it did not set them.
   */
  handler?: (request: Request, denial: RateLimitDenied) => Response | Promise<Response>;
}

/** What `fetchRateLimit`'s function answers for one request. */
export interface FetchRateLimitResult {
  /** Whether the request may go on (also when no limit applies to it). */
  readonly allowed: boolean;
  /** On a denial, the answer to send as it is (429 or 503, the headers, the body); else `undefined`. */
  readonly response: Response | undefined;
  /** The limiter's decision, with the key and cost; `undefined` when no limit applies. */
  readonly decision: RateLimitInfo | undefined;
  /** The rate-limit headers of the decision (none when no limit applies). */
  readonly headers: RateLimitHeaders;
  /**
   * Puts the rate-limit headers on your response and, for `skipFailedRequests` and
   * `skipSuccessfulRequests`, counts it by its status (below 400 succeeded). Returns the response
   * to send: the same one, or a copy when its headers cannot change (a `Response` from `fetch()`).
   */
  finish(response: Response): Response;
}

/**
 * Checks one request. `clientAddress` is the client's IP address as the server saw it, which a
 * Fetch `Request` does not carry (Hono on Node: `getConnInfo(c).remote.address`); the default
 * key reads it, or with `trustProxy` the `X-Forwarded-For` entry of the nearest trusted proxy.
 * Rejects only when `key`, `cost` or `handler` throws or answers what cannot be used.
 */
export type FetchRateLimit = (request: Request, clientAddress?: string) => Promise<FetchRateLimitResult>;

const NO_HEADERS: RateLimitHeaders = Object.freeze({});
const NOT_LIMITED: FetchRateLimitResult = Object.freeze({
  allowed: true,
  response: undefined,
  decision: undefined,
  headers: NO_HEADERS,
  finish: (response: Response) => response,
});

/**
 * Rate limiting for servers built on the Fetch API's `Request` and `Response`: Hono, Next.js
 * route handlers and middleware on the Node.js runtime, Remix, SvelteKit, Astro, Elysia. The
 * function it returns checks a request: on a denial it answers the whole `Response` to send
 * (429 or 503, `Retry-After`, a problem document); else call `finish` on your response to add
 * the rate-limit headers. A limiter never rejects for a store failure. A client that goes away
 * before `finish` (the request's `signal` aborts) counts as a failed request.
 *
 * @example
 * import { Hono } from 'hono';
 * import { getConnInfo } from '@hono/node-server/conninfo';
 * import { perMinute } from '@tiered-limiter/core';
 * import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
 * import { fetchRateLimit } from '@tiered-limiter/http';
 *
 * const limiter = new RequestLimiter({ store: new MemoryStore(), limits: perMinute(60), failurePolicy: 'open' });
 * const rateLimit = fetchRateLimit({ limiter });
 * const app = new Hono();
 * app.use(async (c, next) => {
 *   const limited = await rateLimit(c.req.raw, getConnInfo(c).remote.address);
 *   if (limited.response) return limited.response;
 *   await next();
 *   c.res = limited.finish(c.res);
 * });
 */
export function fetchRateLimit(options: FetchRateLimitOptions): FetchRateLimit {
  const handler = handlerOption(options, 'a function (request, denial) that returns a Response');
  const check = buildCheck(options, { options: ['handler'] });
  // The decision goes on the `Request` as a property: one that shadows `json`, `signal` or `clone`
  // would break the app's own use of the request, so such a name is refused here, as `headers` is.
  const property = options.requestPropertyName;
  if (typeof property === 'string' && property in Request.prototype) {
    throw new ConfigError(
      'requestPropertyName',
      property,
      'a property name a Fetch `Request` does not have (it has json, signal, clone, …), or false',
    );
  }
  const owner = {};
  // Only the default key files a request without an address under "unknown"; a `key` of the
  // caller's that answers "unknown" means it.
  const defaultKey = options.key === undefined;
  return async (request, clientAddress) => {
    const outcome = await check(request, rawOf(request, clientAddress));
    if (outcome === undefined) return NOT_LIMITED;
    if (defaultKey && clientAddress === undefined && outcome.decision.key === UNKNOWN_CLIENT_KEY) {
      warnOnce(
        owner,
        'TL_HTTP_NO_CLIENT_ADDRESS',
        'A request came with no client address, so the default key put it under "unknown", with every ' +
          'other such request: pass the address the server saw (Hono on Node: getConnInfo(c).remote.address), ' +
          'set `trustProxy` to read X-Forwarded-For behind a proxy, or give a `key`.',
      );
    }
    if (outcome.allowed) {
      return {
        allowed: true,
        response: undefined,
        decision: outcome.decision,
        headers: outcome.headers,
        finish: finisher(outcome, request),
      };
    }
    const response =
      handler === undefined
        ? new Response(outcome.body, { status: outcome.status, headers: outcome.headers })
        : withHeaders(await handlerResponse(handler, request, outcome), outcome.headers, false);
    return {
      allowed: false,
      response,
      decision: outcome.decision,
      headers: outcome.headers,
      finish: (answer) => answer,
    };
  };
}

/**
 * What the check reads of a request, from a Fetch `Request`: the method, the path and query
 * (`Request.url` is absolute, and already resolved as a URL parser resolves it), the one header
 * it reads, and the client's address as the server gave it.
 */
function rawOf(request: Request, clientAddress: string | undefined): RawRequest {
  const url = new URL(request.url);
  const forwarded = request.headers.get('x-forwarded-for');
  return {
    method: request.method,
    url: url.pathname + url.search,
    headers: forwarded === null ? {} : { 'x-forwarded-for': forwarded },
    socket: { remoteAddress: clientAddress },
  };
}

/**
 * `finish` of an admission: the headers, and the request counted once, by status or by the client
 * leaving. The request's `signal` is read only when a skip option needs to know: reading it at all
 * makes `Deno.serve` warn, once a process, that it aborts the signal after a successful response.
 */
function finisher(outcome: RateLimitAllowed, request: Request): (response: Response) => Response {
  const { settle, headers } = outcome;
  if (settle === undefined) return (response) => withHeaders(response, headers, true);
  const signal = request.signal;
  let settled = false;
  const settleOnce = (succeeded: boolean) => {
    if (settled) return;
    settled = true;
    signal.removeEventListener('abort', onAbort);
    settle(succeeded);
  };
  const onAbort = () => settleOnce(false);
  if (signal.aborted) settleOnce(false);
  else signal.addEventListener('abort', onAbort, { once: true });
  return (response) => {
    settleOnce(response.status < 400);
    return withHeaders(response, headers, true);
  };
}

/** The handler's answer, refused with a `ConfigError` unless it is a `Response`. */
async function handlerResponse(
  handler: NonNullable<FetchRateLimitOptions['handler']>,
  request: Request,
  denial: RateLimitDenied,
): Promise<Response> {
  const answered: unknown = await handler(request, denial);
  if (!(answered instanceof Response)) {
    throw new ConfigError('handler', answered, 'a function (request, denial) that returns a Response');
  }
  return answered;
}

/**
 * `response` with `headers` on it: set in place, or on a copy when its headers are immutable
 * (`fetch()`'s responses, `Response.redirect`). With `replace` false, a header the response
 * already has is kept: a handler's own `Content-Type` wins over the problem document's.
 */
function withHeaders(response: Response, headers: RateLimitHeaders, replace: boolean): Response {
  const missing = Object.entries(headers).filter(([name]) => replace || !response.headers.has(name));
  if (missing.length === 0) return response;
  try {
    for (const [name, value] of missing) response.headers.set(name, value);
    return response;
  } catch {
    // A `Response.error()` (status 0) cannot be copied: it goes out as it is, without the headers.
    if (response.status < 200) return response;
    const copy = new Response(response.body, response);
    for (const [name, value] of missing) copy.headers.set(name, value);
    return copy;
  }
}
