import type { IncomingMessage } from 'node:http';
import type { Decision, LimitSpec } from '@tiered-limiter/core';
import type { RateLimitHeaderOptions, RateLimitHeaders } from './headers.js';
import type { HttpLimiter } from './limiter.js';
import type { Denial, ProblemOption } from './problem.js';
import type { RouteLimits } from './routes.js';

/** Limits, or a function of the request that picks them (a plan's limits, say). */
export type LimitOption<Req> =
  | LimitSpec
  | readonly LimitSpec[]
  | ((req: Req) => LimitSpec | readonly LimitSpec[]);

/** What `requestPropertyName` puts on the request: the decision, with the key and cost it was made for. */
export interface RateLimitInfo extends Decision {
  /** The key the request was counted under. */
  readonly key: string;
  /** The tokens it took (or asked for, when denied). */
  readonly cost: number;
}

/**
 * Options of `createRateLimit`, `expressRateLimit`, `fastifyRateLimit` and
 * `createRateLimitCheck`. `Req` is the request the framework hands to `key`, `cost`, `skip` and
 * the `limit` function. Every option is checked at construction; an option this package does
 * not know (a migrant's `windowMs` or `max`) is refused with a `ConfigError` naming what to use.
 */
export interface RateLimitOptions<Req = IncomingMessage> extends RateLimitHeaderOptions {
  /**
   * The limit of every request that no route of `routes` names. Without it (and without
   * `limit`), such requests pass untouched (no headers). One of `limiter`, `limit` and `routes`
   * is required.
   */
  limiter?: HttpLimiter;
  /**
   * The limits of every request no route names, when the limiter is to be built here: fixed
   * limits, or a function of the request (plan tiers: `(req) => PLANS[req.user.plan]`). One
   * limiter per distinct set of limits is built with `createLimiter` and kept.
   */
  limit?: LimitOption<Req>;
  /**
   * Builds the limiter of a set of limits, for `limit` (and routes with a `limit`): this
   * package depends on core only, so you choose the tier, store, prefix and failure policy,
   * e.g. `(limits) => new TieredLimiter({ store, limits, failurePolicy: 'open' })`. Two sets
   * with the same names and numbers share one limiter. Required with `limit`.
   */
  createLimiter?: (limits: readonly LimitSpec[]) => HttpLimiter;
  /**
   * Limiters kept for `limit` at most; past it the least recently used is closed (its state
   * lives on in a shared store). A handful of plans needs a handful.
   * @default 100
   */
  maxLimiters?: number;
  /**
   * The key a request is counted under. The usual ones are one line: by header,
   * `key: (req) => String(req.headers['x-api-key'])`; by user, `key: (req) => req.user.id`
   * (after your authentication middleware); by client and route pattern (never the raw URL,
   * whose query a client can vary), on Fastify `key: (r) => ipKey(clientIp(r.raw)) + ' ' + r.routeOptions.url`.
   * @default the client's address, IPv6 by subnet (`ipKey(clientIp(req, trustProxy), ipv6Subnet)`)
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
   * Requests for which this returns true are not limited and get no headers (health checks,
   * your own monitoring, signed-in staff).
   */
  skip?: (req: Req) => boolean;
  /**
   * Client addresses that are never limited: IP addresses and CIDR ranges (`'10.0.0.0/8'`,
   * `'2001:db8::/32'`), compared with the address the default key reads (`trustProxy` applies).
   */
  allowList?: readonly string[];
  /**
   * Proxies in front of the server whose `X-Forwarded-For` entry the default key believes.
   * Off (0) by default because any client can write that header: believed without a proxy
   * that appends to it, it lets a client pick its own key, escape its limit, and spend
   * someone else's. Set it to the number of proxies that append, no more. While this is 0, the
   * framework's own setting is believed instead: an Express app's `trust proxy` (`req.ip`), a
   * Fastify app's `trustProxy` (`request.ip`); above 0 it wins over theirs. The header arriving
   * while nothing trusts it, on a request whose address is read (the default key, `allowList`), raises
   * one process warning (`TL_HTTP_UNTRUSTED_FORWARDED_FOR`).
   * @default 0
   */
  trustProxy?: number;
  /**
   * Bits of an IPv6 client address the default key keeps (1 to 128), so that a client holding
   * a whole network counts once; `false` keys every address apart (as 128 does).
   * @default 56
   */
  ipv6Subnet?: number | false;
  /**
   * Status of a denial by a limit.
   * @default 429
   */
  statusCode?: number;
  /**
   * The body of a denial instead of the problem document: a string (sent as `text/plain`), an
   * object (sent as JSON), or a function of the request and the denial returning either at once
   * (what else it returns, a promise included, is a `ConfigError` on the framework's error path).
   */
  message?: string | object | ((req: Req, denial: Denial) => string | object);
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
  /**
   * Called for every request refused, before the denial is sent (to log or count it). One that
   * throws, or returns a promise that rejects, raises one process warning
   * (`TL_HTTP_ON_EXCEEDED_FAILED`); the denial is sent all the same.
   */
  onExceeded?: (req: Req, denial: RateLimitDenied) => void;
  /**
   * The request property that receives the `RateLimitInfo` (`req.rateLimit.remaining`); `false`
   * sets none. A property the request already has (`headers`, `ip`, `body`, `__proto__`, …) is
   * refused at construction.
   * @default 'rateLimit'
   */
  requestPropertyName?: string | false;
  /**
   * Give a request's tokens back when its response fails (status 400 or above, or the
   * connection closed before the response ended), so that only requests that succeeded count.
   * Needs a limiter with `reward`. A decision of a failure policy is not given back.
   * @default false
   */
  skipFailedRequests?: boolean;
  /**
   * Give a request's tokens back when its response succeeds (status below 400), so that only
   * failures count (failed logins, say). Needs a limiter with `reward`.
   * @default false
   */
  skipSuccessfulRequests?: boolean;
}

/** The limiter's answer to a request that may go ahead: the headers to add. */
export interface RateLimitAllowed {
  /** The request went ahead. */
  readonly allowed: true;
  /** The limiter's decision, with the key and cost. */
  readonly decision: RateLimitInfo;
  /** `RateLimit-Policy`, `RateLimit`, and the optional ones; see `rateLimitHeaders`. */
  readonly headers: RateLimitHeaders;
  /**
   * Call with the response's outcome once it has ended, for `skipFailedRequests` and
   * `skipSuccessfulRequests`: gives the tokens back when the options say so. The adapters call it;
   * `undefined` when no option asks for it.
   */
  readonly settle: ((succeeded: boolean) => void) | undefined;
}

/** The limiter's answer to a request that is refused: the whole response to send. */
export interface RateLimitDenied {
  /** The request was refused (the response is already written). */
  readonly allowed: false;
  /** The limiter's decision, with the key and cost. */
  readonly decision: RateLimitInfo;
  /** `statusCode` (429), or `failClosedStatus` for a denial by the `closed` failure policy. */
  readonly status: number;
  /** The rate-limit headers, `Retry-After`, and `Content-Type`. */
  readonly headers: RateLimitHeaders;
  /** The body: the problem document, or `message`. */
  readonly body: string;
}

/** What a rate-limit check answers: the response to send, or the headers to add. */
export type RateLimitOutcome = RateLimitAllowed | RateLimitDenied;
