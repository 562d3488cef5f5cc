import { ConfigError, internal } from '@tiered-limiter/core';
import {
  DEFAULT_FAIL_CLOSED_STATUS,
  DEFAULT_IPV6_SUBNET,
  DEFAULT_REQUEST_PROPERTY,
  DEFAULT_STANDARD_HEADERS,
  DEFAULT_STATUS_CODE,
  DEFAULT_TRUST_PROXY,
} from './defaults.js';
import type { RateLimitHeaderOptions, StandardHeaders } from './headers.js';
import { AllowList } from './ip.js';
import { assertKnownOptions, OPTION_NAMES, ROUTE_OPTION_NAMES } from './known-options.js';
import { isLimiter } from './limiter.js';
import { LimiterCache, type LimiterNeeds, type LimiterSource, limiterSource } from './limiter-source.js';
import type { RateLimitOptions } from './options.js';
import { RouteTable } from './routes.js';

const { assertInteger, smallestCapacity } = internal;

/** Request properties the middleware must not overwrite with its `RateLimitInfo`. */
const RESERVED_PROPERTIES = new Set([
  '__proto__',
  'constructor',
  'prototype',
  'headers',
  'method',
  'url',
  'socket',
  'body',
  'params',
  'query',
  'raw',
  'ip',
]);

/** A route's limit, checked: where its limiter comes from, its cost and key. */
export interface ResolvedRoute<Req> {
  readonly source: LimiterSource<Req>;
  readonly cost: number | ((req: Req) => number) | undefined;
  readonly key: ((req: Req) => string) | undefined;
}

/** Every option, checked and with its default. */
export interface Settings<Req> {
  readonly source: LimiterSource<Req> | undefined;
  readonly routes: RouteTable<ResolvedRoute<Req> | false> | undefined;
  /** Resolves a route's own options (Fastify's `config.rateLimit`), checked as `routes` entries are. */
  readonly resolveRoute: (where: string, value: unknown) => ResolvedRoute<Req> | false;
  readonly key: ((req: Req) => string) | undefined;
  readonly cost: ((req: Req) => number) | undefined;
  readonly skip: ((req: Req) => boolean) | undefined;
  readonly allowList: AllowList | undefined;
  readonly trustProxy: number;
  readonly ipv6Subnet: number | false;
  readonly statusCode: number;
  readonly failClosedStatus: number;
  readonly requestProperty: string | false;
  readonly skipFailed: boolean;
  readonly skipSuccessful: boolean;
  readonly headers: RateLimitHeaderOptions;
}

/** An HTTP field name: an RFC 9110 token. */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

/**
 * Checks `options` and fills in the defaults, throwing a `ConfigError` that names the first
 * option refused. `extra` are the option names an adapter adds (`handler`); `routesOnly` lets the
 * middleware go without a limiter of its own (Fastify routes may bring theirs).
 */
export function settingsOf<Req>(
  options: RateLimitOptions<Req>,
  extra: readonly string[],
  routesOnly: boolean,
): Settings<Req> {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ConfigError('options', options, 'an object');
  }
  assertKnownOptions('', options, [...OPTION_NAMES, ...extra]);
  const key = optionalFunction('key', options.key);
  const cost = optionalFunction('cost', options.cost);
  const skip = optionalFunction('skip', options.skip);
  optionalFunction('onExceeded', options.onExceeded);
  const skipFailed = optionalBoolean('skipFailedRequests', options.skipFailedRequests);
  const skipSuccessful = optionalBoolean('skipSuccessfulRequests', options.skipSuccessfulRequests);
  const needs: LimiterNeeds = { reward: skipFailed || skipSuccessful };
  let cache: LimiterCache | undefined;
  const limiters = () => {
    cache ??= new LimiterCache(options.createLimiter, options.maxLimiters, needs);
    return cache;
  };
  if (options.createLimiter !== undefined) limiters();
  else if (options.maxLimiters !== undefined) {
    throw new ConfigError(
      'maxLimiters',
      options.maxLimiters,
      'given only with createLimiter (it bounds the limiters made)',
    );
  }

  /** Checks one route's limit; `where` names it in errors (`routes['/login']`). */
  const resolveRoute = (where: string, value: unknown): ResolvedRoute<Req> | false => {
    if (value === false) return false;
    if (value === null || typeof value !== 'object') {
      throw new ConfigError(where, value, 'a limiter, { limiter or limit, cost?, key? }, or false');
    }
    if (typeof (value as { consume?: unknown }).consume === 'function') {
      return {
        source: limiterSource(`${where}.`, value, undefined, limiters, needs)!,
        cost: undefined,
        key: undefined,
      };
    }
    assertKnownOptions(where, value, ROUTE_OPTION_NAMES);
    const route = value as { limiter?: unknown; limit?: never; cost?: unknown; key?: unknown };
    const source = limiterSource<Req>(`${where}.`, route.limiter, route.limit, limiters, needs);
    if (source === undefined) {
      throw new ConfigError(`${where}.limiter`, route.limiter, 'a limiter (or give the route a `limit`)');
    }
    const routeCost = route.cost;
    if (
      routeCost !== undefined &&
      typeof routeCost !== 'function' &&
      !(typeof routeCost === 'number' && Number.isInteger(routeCost) && routeCost >= 1)
    ) {
      throw new ConfigError(`${where}.cost`, routeCost, 'an integer from 1 up, or a function of the request');
    }
    // A fixed cost no bucket of the route's limiter can ever hold would fail every request.
    const fixedLimits = isLimiter(route.limiter) ? route.limiter.limits : undefined;
    if (
      typeof routeCost === 'number' &&
      fixedLimits !== undefined &&
      routeCost > smallestCapacity(fixedLimits)
    ) {
      throw new ConfigError(
        `${where}.cost`,
        routeCost,
        `at most the route limiter's smallest capacity (${smallestCapacity(fixedLimits)})`,
      );
    }
    return {
      source,
      cost: routeCost as ResolvedRoute<Req>['cost'],
      key: optionalFunction(`${where}.key`, route.key as ((req: Req) => string) | undefined),
    };
  };

  const source = limiterSource<Req>('', options.limiter, options.limit, limiters, needs);
  const routes =
    options.routes === undefined
      ? undefined
      : new RouteTable<ResolvedRoute<Req> | false>(options.routes, (name, value) =>
          resolveRoute(`routes['${name}']`, value),
        );
  if (source === undefined && !routesOnly && (routes === undefined || routes.empty)) {
    throw new ConfigError(
      'limiter',
      options.limiter,
      'a limiter, a `limit`, or at least one route in `routes`',
    );
  }

  const problem = options.problem;
  if (problem !== undefined && (problem === null || !['object', 'function'].includes(typeof problem))) {
    throw new ConfigError('problem', problem, 'a partial problem document or a function returning one');
  }
  const message = options.message;
  if (
    message !== undefined &&
    (message === null || !['string', 'object', 'function'].includes(typeof message))
  ) {
    throw new ConfigError('message', message, 'a string, an object, or a function returning one');
  }
  const degradedHeader = options.degradedHeader;
  if (
    degradedHeader !== undefined &&
    degradedHeader !== false &&
    !(typeof degradedHeader === 'string' && HEADER_NAME.test(degradedHeader))
  ) {
    throw new ConfigError('degradedHeader', degradedHeader, 'a header name, or false');
  }
  const standardHeaders = options.standardHeaders ?? DEFAULT_STANDARD_HEADERS;
  if (standardHeaders !== 'draft-11' && standardHeaders !== 'draft-10' && standardHeaders !== false) {
    throw new ConfigError(
      'standardHeaders',
      standardHeaders,
      "'draft-11', 'draft-10' (the same RateLimit-Policy and RateLimit fields) or false; " +
        'the RateLimit-Limit/-Remaining/-Reset of older drafts are not sent, `legacyHeaders: true` sends X-RateLimit-*',
    );
  }
  const failClosedStatus = options.failClosedStatus ?? DEFAULT_FAIL_CLOSED_STATUS;
  if (failClosedStatus !== 429 && failClosedStatus !== 503) {
    throw new ConfigError('failClosedStatus', failClosedStatus, 'one of 429, 503');
  }
  const ipv6Subnet = options.ipv6Subnet ?? DEFAULT_IPV6_SUBNET;
  if (ipv6Subnet !== false) assertInteger('ipv6Subnet', ipv6Subnet, 1, 128);
  const requestProperty = options.requestPropertyName ?? DEFAULT_REQUEST_PROPERTY;
  if (
    requestProperty !== false &&
    !(
      typeof requestProperty === 'string' &&
      requestProperty !== '' &&
      !RESERVED_PROPERTIES.has(requestProperty)
    )
  ) {
    throw new ConfigError(
      'requestPropertyName',
      requestProperty,
      'a property name of its own (not one the request or Object already has, such as headers or __proto__), or false',
    );
  }

  return {
    source,
    routes,
    resolveRoute,
    key,
    cost,
    skip,
    allowList: options.allowList === undefined ? undefined : new AllowList(options.allowList),
    trustProxy: assertInteger('trustProxy', options.trustProxy ?? DEFAULT_TRUST_PROXY, 0, 100),
    ipv6Subnet,
    statusCode: assertInteger('statusCode', options.statusCode ?? DEFAULT_STATUS_CODE, 400, 599),
    failClosedStatus,
    requestProperty,
    skipFailed,
    skipSuccessful,
    headers: {
      standardHeaders: standardHeaders as StandardHeaders,
      legacyHeaders: optionalBoolean('legacyHeaders', options.legacyHeaders),
      degradedHeader,
    },
  };
}

function optionalFunction<F>(option: string, value: F | undefined): F | undefined {
  if (value !== undefined && typeof value !== 'function') {
    throw new ConfigError(option, value, 'a function of the request');
  }
  return value;
}

function optionalBoolean(option: string, value: unknown): boolean {
  if (value !== undefined && typeof value !== 'boolean') throw new ConfigError(option, value, 'a boolean');
  return value === true;
}
