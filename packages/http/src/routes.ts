import { ConfigError, type Decision, type LimitSpec } from '@tiered-limiter/core';

/**
 * What the middleware needs of a limiter: its limits (for `RateLimit-Policy`) and `consume`.
 * `RequestLimiter` and `TieredLimiter` from `@tiered-limiter/local` fit; with `tryConsume`
 * (the two-tier limiter's synchronous hot path), it is asked first, and `consume` only when
 * it returns `undefined`.
 */
export interface HttpLimiter {
  /** The limits, all-or-nothing. */
  readonly limits: readonly LimitSpec[];
  /** Takes `cost` tokens for `key`; resolves a `Decision`, never rejects for a store failure. */
  consume(key: string, cost?: number): Promise<Decision>;
  /** A decision without a promise when one can be made locally, else `undefined`. */
  tryConsume?(key: string, cost?: number): Decision | undefined;
}

/** A route's own limit: a limiter, and optionally its own cost and key. */
export interface RouteLimit<Req> {
  /** The limiter of this route. */
  limiter: HttpLimiter;
  /**
   * Tokens a request takes: a number, or a function of the request.
   * @default the middleware's `cost`, else 1
   */
  cost?: number | ((req: Req) => number);
  /**
   * The key a request is counted under.
   * @default the middleware's `key`, else the client's IP address
   */
  key?: (req: Req) => string;
}

/**
 * Limits by route. A name is a path (`/login`), a path with a method (`POST /login`), or a
 * prefix ending in `/*` (`/api/*` is `/api` and everything under it). Paths are compared
 * without query, case-insensitively, with repeated and trailing slashes ignored and
 * percent-escapes decoded, so that a spelling a router would still send to the handler
 * (`/Login/`, `/log%69n`) cannot dodge the route's limit. The most specific name wins: an
 * exact path before a prefix, a longer prefix before a shorter one, a name with the method
 * before one without.
 */
export type RouteLimits<Req> = Readonly<Record<string, HttpLimiter | RouteLimit<Req>>>;

/** A route's limit, resolved. */
export interface ResolvedRoute<Req> {
  readonly limiter: HttpLimiter;
  readonly cost: number | ((req: Req) => number) | undefined;
  readonly key: ((req: Req) => string) | undefined;
}

interface PrefixRoute<Req> {
  readonly method: string | undefined;
  readonly prefix: string;
  readonly route: ResolvedRoute<Req>;
}

const METHOD = /^([A-Za-z]+)\s+(\S+)$/;

/** The compiled `routes` option: finds a request's route limit in one map lookup or a short scan. */
export class RouteTable<Req> {
  readonly #exact = new Map<string, ResolvedRoute<Req>>();
  readonly #prefixes: PrefixRoute<Req>[] = [];

  constructor(routes: RouteLimits<Req>) {
    if (routes === null || typeof routes !== 'object') throw new ConfigError('routes', routes, 'an object');
    for (const [name, value] of Object.entries(routes)) {
      const route = resolve(name, value);
      const match = METHOD.exec(name.trim());
      const method = match ? match[1]!.toUpperCase() : undefined;
      const path = match ? match[2]! : name.trim();
      if (!path.startsWith('/')) throw new ConfigError(`routes['${name}']`, name, "a path starting with '/'");
      if (path.endsWith('/*')) {
        this.#prefixes.push({ method, prefix: normalizePath(path.slice(0, -2)), route });
      } else {
        this.#exact.set(`${method ?? '*'} ${normalizePath(path)}`, route);
      }
    }
    // Longest prefix first; at equal length, the one with a method first.
    this.#prefixes.sort(
      (a, b) =>
        b.prefix.length - a.prefix.length || Number(b.method !== undefined) - Number(a.method !== undefined),
    );
  }

  /** Whether there are no routes. */
  get empty(): boolean {
    return this.#exact.size === 0 && this.#prefixes.length === 0;
  }

  /** The limiters of every route, each once. */
  limiters(): HttpLimiter[] {
    const all = new Set<HttpLimiter>();
    for (const route of this.#exact.values()) all.add(route.limiter);
    for (const { route } of this.#prefixes) all.add(route.limiter);
    return [...all];
  }

  /** The route limit of a request, or `undefined` when no route names it. */
  find(method: string | undefined, url: string | undefined): ResolvedRoute<Req> | undefined {
    const path = normalizePath(pathOf(url ?? '/'));
    const verb = (method ?? 'GET').toUpperCase();
    const exact = this.#exact.get(`${verb} ${path}`) ?? this.#exact.get(`* ${path}`);
    if (exact) return exact;
    for (const entry of this.#prefixes) {
      if (entry.method !== undefined && entry.method !== verb) continue;
      if (path === entry.prefix || path.startsWith(entry.prefix === '/' ? '/' : `${entry.prefix}/`)) {
        return entry.route;
      }
    }
    return undefined;
  }
}

function resolve<Req>(name: string, value: HttpLimiter | RouteLimit<Req>): ResolvedRoute<Req> {
  if (isLimiter(value)) return { limiter: value, cost: undefined, key: undefined };
  if (value === null || typeof value !== 'object' || !isLimiter(value.limiter)) {
    throw new ConfigError(`routes['${name}']`, value, 'a limiter, or { limiter, cost?, key? }');
  }
  const { cost, key } = value;
  if (cost !== undefined && typeof cost !== 'function' && !(Number.isInteger(cost) && cost >= 1)) {
    throw new ConfigError(
      `routes['${name}'].cost`,
      cost,
      'an integer from 1 up, or a function of the request',
    );
  }
  if (key !== undefined && typeof key !== 'function') {
    throw new ConfigError(`routes['${name}'].key`, key, 'a function of the request');
  }
  return { limiter: value.limiter, cost, key };
}

/** Whether `value` has what the middleware calls: `limits` and `consume`. */
export function isLimiter(value: unknown): value is HttpLimiter {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as HttpLimiter).consume === 'function' &&
    Array.isArray((value as HttpLimiter).limits)
  );
}

/** The path of a request target, without query or fragment. */
function pathOf(url: string): string {
  let end = url.length;
  const query = url.indexOf('?');
  if (query !== -1) end = query;
  const hash = url.indexOf('#');
  if (hash !== -1 && hash < end) end = hash;
  return url.slice(0, end);
}

/** Lower case, percent-escapes decoded, repeated and trailing slashes dropped. */
export function normalizePath(path: string): string {
  let out = path;
  if (out.includes('%')) {
    try {
      out = decodeURIComponent(out);
    } catch {
      // A malformed escape: compare it as written.
    }
  }
  out = out.toLowerCase().replace(/\/{2,}/g, '/');
  if (out.length > 1 && out.endsWith('/')) out = out.replace(/\/+$/, '') || '/';
  return out.startsWith('/') ? out : `/${out}`;
}
