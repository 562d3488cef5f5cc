import type { IncomingMessage } from 'node:http';
import { assertInteger, ConfigError, type Decision } from '@tiered-limiter/core';
import { clientIp } from './client-ip.js';
import { DEFAULT_FAIL_CLOSED_STATUS, DEFAULT_TRUST_PROXY, PROBLEM_CONTENT_TYPE } from './defaults.js';
import {
  type RateLimitHeaderOptions,
  type RateLimitHeaders,
  type RateLimitPolicy,
  rateLimitHeaders,
  rateLimitPolicy,
} from './headers.js';
import { type ProblemOption, problemBody } from './problem.js';
import { type HttpLimiter, isLimiter, type ResolvedRoute, type RouteLimits, RouteTable } from './routes.js';
import { wholeSeconds } from './seconds.js';

/**
 * Options of `createRateLimit`, `expressRateLimit`, `fastifyRateLimit` and
 * `createRateLimitCheck`. `Req` is the request the framework hands to `key` and `cost`.
 */
export interface RateLimitOptions<Req = IncomingMessage> extends RateLimitHeaderOptions {
  /**
   * The limit of every request that no route of `routes` names. Without it, such requests
   * pass untouched (no headers). One of `limiter` and `routes` is required.
   */
  limiter?: HttpLimiter;
  /**
   * The key a request is counted under. The usual ones are one line: by header,
   * `key: (req) => String(req.headers['x-api-key'])`; by user, `key: (req) => req.user.id`
   * (after your authentication middleware); by client and route pattern (never the raw URL,
   * whose query a client can vary), on Fastify `key: (r) => clientIp(r.raw) + ' ' + r.routeOptions.url`.
   * @default the client's IP address (`clientIp(req, trustProxy)`)
   */
  key?: (req: Req) => string;
  /**
   * Tokens a request takes, a whole number from 1 to the limit's capacity.
   * @default 1
   */
  cost?: (req: Req) => number;
  /** Limits by route, each replacing `limiter` for the requests it names. See `RouteLimits`. */
  routes?: RouteLimits<Req>;
  /**
   * Proxies in front of the server whose `X-Forwarded-For` entry the default key believes.
   * Off (0) by default because any client can write that header: believed without a proxy
   * that appends to it, it lets a client pick its own key, escape its limit, and spend
   * someone else's. Set it to the number of proxies that append, no more.
   * @default 0
   */
  trustProxy?: number;
  /**
   * The body of a denial (`application/problem+json`): a partial problem document laid over
   * the default, or a function of the denial that returns the whole document.
   * @default `{ type: 'about:blank', title: 'Too Many Requests', status: 429, detail: 'Too many requests; retry in 2 s.' }`
   */
  problem?: ProblemOption;
  /**
   * Status of a denial by the `closed` failure policy (the store failed; the client did not
   * exceed anything). 503 tells clients and dashboards that the service is at fault; 429
   * hides the outage behind the client's rate.
   * @default 503
   */
  failClosedStatus?: 429 | 503;
}

/** The limiter's answer to a request that may go ahead: the headers to add. */
export interface RateLimitAllowed {
  /** Always `true`: the request may go on. */
  readonly allowed: true;
  /** The limiter's decision. */
  readonly decision: Decision;
  /** `RateLimit-Policy`, `RateLimit`, and the optional ones; see `rateLimitHeaders`. */
  readonly headers: RateLimitHeaders;
}

/** The limiter's answer to a request that is refused: the whole response to send. */
export interface RateLimitDenied {
  /** Always `false`: answer with `status` and `body` instead of going on. */
  readonly allowed: false;
  /** The limiter's decision. */
  readonly decision: Decision;
  /** 429, or `failClosedStatus` for a denial by the `closed` failure policy. */
  readonly status: number;
  /** The rate-limit headers, `Retry-After`, and `Content-Type: application/problem+json`. */
  readonly headers: RateLimitHeaders;
  /** The problem document, as JSON. */
  readonly body: string;
}

/** What a rate-limit check answers: the response to send, or the headers to add. */
export type RateLimitOutcome = RateLimitAllowed | RateLimitDenied;

/**
 * Checks one request. `req` is what `key` and `cost` are given; `raw` is Node's message
 * underneath (the same object for Node `http` and Express), which the default key and the
 * route table read. Answers `undefined` when no limit applies to the request. Synchronous
 * when the limiter's `tryConsume` could decide, else a promise; `await` takes both.
 */
export type RateLimitCheck<Req> = (
  req: Req,
  raw: IncomingMessage,
) => RateLimitOutcome | undefined | Promise<RateLimitOutcome | undefined>;

/** An HTTP field name: an RFC 9110 token. */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

/**
 * The framework-free core of the middleware, for a framework this package has no adapter
 * for: picks the request's limit, key and cost, asks the limiter (its synchronous
 * `tryConsume` first, when it has one), and answers the headers and, on a denial, the status
 * and body. Throws a `ConfigError` for bad options.
 *
 * @example
 * // Koa
 * const check = createRateLimitCheck({ limiter });
 * app.use(async (ctx, next) => {
 *   const outcome = await check(ctx.req, ctx.req);
 *   if (outcome) ctx.set(outcome.headers);
 *   if (outcome && !outcome.allowed) {
 *     ctx.status = outcome.status;
 *     ctx.body = outcome.body;
 *     return;
 *   }
 *   await next();
 * });
 */
export function createRateLimitCheck<Req = IncomingMessage>(
  options: RateLimitOptions<Req>,
): RateLimitCheck<Req> {
  if (options === null || typeof options !== 'object') throw new ConfigError('options', options, 'an object');
  const { limiter, key, cost, problem } = options;
  if (limiter !== undefined && !isLimiter(limiter)) {
    throw new ConfigError('limiter', limiter, 'a limiter (an object with limits and consume)');
  }
  if (key !== undefined && typeof key !== 'function') {
    throw new ConfigError('key', key, 'a function of the request');
  }
  if (cost !== undefined && typeof cost !== 'function') {
    throw new ConfigError('cost', cost, 'a function of the request');
  }
  if (problem !== undefined && (problem === null || !['object', 'function'].includes(typeof problem))) {
    throw new ConfigError('problem', problem, 'a partial problem document or a function returning one');
  }
  const degradedHeader = options.degradedHeader;
  if (degradedHeader !== undefined && degradedHeader !== false && !HEADER_NAME.test(degradedHeader)) {
    throw new ConfigError('degradedHeader', degradedHeader, 'a header name, or false');
  }
  const trustProxy = assertInteger('trustProxy', options.trustProxy ?? DEFAULT_TRUST_PROXY, 0, 100);
  const failClosedStatus = options.failClosedStatus ?? DEFAULT_FAIL_CLOSED_STATUS;
  if (failClosedStatus !== 429 && failClosedStatus !== 503) {
    throw new ConfigError('failClosedStatus', failClosedStatus, 'one of 429, 503');
  }
  const routes = options.routes === undefined ? undefined : new RouteTable<Req>(options.routes);
  if (limiter === undefined && (routes === undefined || routes.empty)) {
    throw new ConfigError('limiter', limiter, 'a limiter, or at least one route in `routes`');
  }
  const headerOptions: RateLimitHeaderOptions = {
    legacyHeaders: options.legacyHeaders ?? false,
    degradedHeader,
  };

  // Every limiter's RateLimit-Policy, computed once.
  const policies = new Map<HttpLimiter, RateLimitPolicy>();
  for (const each of [...(limiter ? [limiter] : []), ...(routes?.limiters() ?? [])]) {
    policies.set(each, rateLimitPolicy(each.limits));
  }

  const answer = (decision: Decision, policy: RateLimitPolicy): RateLimitOutcome => {
    const headers = rateLimitHeaders(decision, policy, headerOptions);
    if (decision.allowed) return { allowed: true, decision, headers };
    const status = decision.tier === 'fallback' && decision.policy === 'closed' ? failClosedStatus : 429;
    const body = problemBody(problem, {
      decision,
      status,
      retryAfterSeconds: wholeSeconds(decision.retryAfterMs),
    });
    headers['Content-Type'] = PROBLEM_CONTENT_TYPE;
    return { allowed: false, decision, status, headers, body };
  };

  return (req, raw) => {
    const route: ResolvedRoute<Req> | undefined = routes?.find(raw.method, originalUrl(raw));
    const chosen = route?.limiter ?? limiter;
    if (chosen === undefined) return undefined;
    const policy = policies.get(chosen)!;
    const keyOf = route?.key ?? key;
    const k = keyOf === undefined ? clientIp(raw, trustProxy) : keyOf(req);
    const routeCost = route?.cost;
    const c =
      typeof routeCost === 'number'
        ? routeCost
        : typeof routeCost === 'function'
          ? routeCost(req)
          : cost === undefined
            ? 1
            : cost(req);
    const fast = chosen.tryConsume?.(k, c);
    if (fast !== undefined) return answer(fast, policy);
    return chosen.consume(k, c).then((decision) => answer(decision, policy));
  };
}

/** Express keeps the URL before mounting in `originalUrl`; Node and Fastify's raw message have `url`. */
function originalUrl(raw: IncomingMessage): string | undefined {
  return (raw as IncomingMessage & { originalUrl?: string }).originalUrl ?? raw.url;
}
