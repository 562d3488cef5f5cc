import type { IncomingMessage } from 'node:http';
import { ConfigError, type Decision } from '@tiered-limiter/core';
import { clientIp } from './client-ip.js';
import { rateLimitHeaders } from './headers.js';
import { ipKey } from './ip.js';
import type { LimiterEntry } from './limiter-source.js';
import type { RateLimitInfo, RateLimitOptions, RateLimitOutcome } from './options.js';
import { type DenialBody, denialBody } from './problem.js';
import type { RawRequest } from './raw-request.js';
import { wholeSeconds } from './seconds.js';
import { type ResolvedRoute, settingsOf } from './settings.js';
import { warnOnce } from './warn.js';

/**
 * Checks one request. `req` is what `key`, `cost`, `skip` and `limit` are given; `raw` is what
 * the default key and the route table read (`RawRequest`: Node's message underneath). Answers
 * `undefined` when no limit applies to the request. Synchronous when the limiter's `tryConsume`
 * could decide, else a promise; `await` takes both.
 */
export type RateLimitCheck<Req> = (
  req: Req,
  raw: RawRequest,
) => RateLimitOutcome | undefined | Promise<RateLimitOutcome | undefined>;

/** What an adapter adds to the framework-free check. */
export interface AdapterHooks<Req> {
  /** Option names the adapter takes beyond `RateLimitOptions` (`handler`). */
  readonly options: readonly string[];
  /** The route's own limit options (Fastify's `config.rateLimit`), read per request. */
  readonly routeConfig?: (req: Req) => unknown;
  /** The client address the framework's own proxy setting vouches for (Express's `trust proxy`). */
  readonly trustedIp?: (req: Req) => string | undefined;
  /**
   * The framework routes the path as sent (Express, Fastify): no `..` resolved, no `//host` read
   * as an authority. Without it the router is the user's, maybe a URL parser, and the route table
   * also looks up the path a URL parser would route.
   */
  readonly literalPaths?: boolean;
}

const NO_HOOKS: AdapterHooks<unknown> = { options: [] };

/**
 * The framework-free core of the middleware, for a framework this package has no adapter
 * for: picks the request's limit, key and cost, asks the limiter (its synchronous
 * `tryConsume` first, when it has one), and answers the headers and, on a denial, the status
 * and body. Throws a `ConfigError` for bad options. Call the outcome's `settle` when the
 * response has ended, for `skipFailedRequests`/`skipSuccessfulRequests`.
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
  return buildCheck(options, NO_HOOKS as AdapterHooks<Req>);
}

/** `createRateLimitCheck` with an adapter's hooks. */
export function buildCheck<Req>(
  options: RateLimitOptions<Req>,
  hooks: AdapterHooks<Req>,
): RateLimitCheck<Req> {
  const routeConfig = hooks.routeConfig;
  const settings = settingsOf(options, hooks.options, routeConfig !== undefined);
  const { routes, source, skip, allowList, trustProxy, ipv6Subnet, key, cost } = settings;
  const { onExceeded, message, problem } = options;
  const body: DenialBody<Req> = { message, problem };
  const owner = {};
  const rewardFailed = (error: unknown) =>
    warnOnce(owner, 'TL_HTTP_REWARD_FAILED', `limiter.reward failed: ${String(error)}`);
  // `onExceeded` only watches: a log or a metric that fails must not turn every 429 into a 500
  // (with no Retry-After, and an error logged per request) while a client is being refused.
  const exceededFailed = (error: unknown) =>
    warnOnce(
      owner,
      'TL_HTTP_ON_EXCEEDED_FAILED',
      `onExceeded failed (the denial was sent): ${String(error)}`,
    );
  const configRoutes = new WeakMap<object, ResolvedRoute<Req> | false>();
  const resolving = hooks.literalPaths !== true;

  const addressOf = (req: Req, raw: RawRequest): string => {
    if (trustProxy === 0) {
      const trusted = hooks.trustedIp?.(req);
      if (trusted !== undefined) return ipKey(trusted, false);
      if (raw.headers['x-forwarded-for'] !== undefined) {
        warnOnce(
          owner,
          'TL_HTTP_UNTRUSTED_FORWARDED_FOR',
          'X-Forwarded-For arrived, but trustProxy is 0 and the framework believed none of it: requests ' +
            'are keyed by the socket address. Behind a proxy that is the proxy, and every client shares one ' +
            'limit. Set `trustProxy` to the number of proxies that append to X-Forwarded-For (on Express, ' +
            "or app.set('trust proxy', n); on Fastify, or Fastify({ trustProxy }) with the proxies' " +
            'addresses: Fastify 5.12.1 and later trust no hop count).',
        );
      }
    }
    return clientIp(raw, trustProxy);
  };

  const routeOf = (req: Req, raw: RawRequest): ResolvedRoute<Req> | false | undefined => {
    if (routeConfig !== undefined) {
      const config = routeConfig(req);
      if (config === false) return false;
      if (config !== undefined && config !== null && typeof config === 'object') {
        let resolved = configRoutes.get(config);
        if (resolved === undefined) {
          resolved = settings.resolveRoute(`config.rateLimit (${raw.method} ${raw.url})`, config);
          configRoutes.set(config, resolved);
        }
        return resolved;
      }
    }
    return routes?.find(raw.method, originalUrl(raw), resolving);
  };

  return (req, raw) => {
    const route = routeOf(req, raw);
    if (route === false) return undefined;
    const from = route?.source ?? source;
    if (from === undefined) return undefined;
    if (skip !== undefined) {
      const skipped = skip(req);
      if (skipped === true) return undefined;
      if (skipped !== false) {
        throw new ConfigError('skip', skipped, 'true or false, at once (an async skip is not awaited)');
      }
    }
    let address: string | undefined;
    if (allowList !== undefined) {
      address = addressOf(req, raw);
      if (allowList.has(address)) return undefined;
    }
    const keyOf = route?.key ?? key;
    const k = keyOf === undefined ? ipKey(address ?? addressOf(req, raw), ipv6Subnet) : keyOf(req);
    const entry = from(req);
    const routeCost = route?.cost;
    const c =
      typeof routeCost === 'number'
        ? routeCost
        : typeof routeCost === 'function'
          ? routeCost(req)
          : cost === undefined
            ? 1
            : cost(req);
    const fast = entry.limiter.tryConsume?.(k, c);
    if (fast !== undefined) return answer(req, fast, entry, k, c);
    return entry.limiter.consume(k, c).then((decision) => answer(req, decision, entry, k, c));
  };

  function answer(req: Req, decision: Decision, entry: LimiterEntry, k: string, c: number): RateLimitOutcome {
    const info: RateLimitInfo = { ...decision, key: k, cost: c };
    if (settings.requestProperty !== false) (req as Record<string, unknown>)[settings.requestProperty] = info;
    const headers = rateLimitHeaders(decision, entry.policy, settings.headers, c);
    if (decision.allowed)
      return { allowed: true, decision: info, headers, settle: settler(decision, entry, k, c) };
    const closed = decision.tier === 'fallback' && decision.policy === 'closed';
    const status = closed ? settings.failClosedStatus : settings.statusCode;
    const denial = { decision: info, status, retryAfterSeconds: wholeSeconds(decision.retryAfterMs) };
    const written = denialBody(body, req, denial);
    headers['Content-Type'] = written.contentType;
    const outcome = { allowed: false as const, decision: info, status, headers, body: written.body };
    if (onExceeded !== undefined) {
      try {
        const watched: unknown = onExceeded(req, outcome);
        if (watched instanceof Promise) watched.catch(exceededFailed);
      } catch (error) {
        exceededFailed(error);
      }
    }
    return outcome;
  }

  function settler(
    decision: Decision,
    entry: LimiterEntry,
    k: string,
    c: number,
  ): ((succeeded: boolean) => void) | undefined {
    const { skipFailed, skipSuccessful } = settings;
    // A failure policy's decision took nothing from the limiter's buckets: nothing to give back.
    if ((!skipFailed && !skipSuccessful) || decision.tier === 'fallback' || decision.shadowDenied) {
      return undefined;
    }
    return (succeeded) => {
      if (succeeded ? !skipSuccessful : !skipFailed) return;
      // A limiter closed while the response ran (a shutdown, `maxLimiters` evicting it) throws
      // at once rather than rejecting; either way the response has ended, and only a warning is due.
      try {
        entry.limiter.reward!(k, c).catch(rewardFailed);
      } catch (error) {
        rewardFailed(error);
      }
    };
  }
}

/** Express keeps the URL before mounting in `originalUrl`; Node and Fastify's raw message have `url`. */
function originalUrl(raw: RawRequest): string | undefined {
  return (raw as RawRequest & { originalUrl?: string }).originalUrl ?? raw.url;
}
