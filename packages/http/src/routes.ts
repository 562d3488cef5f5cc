import { ConfigError } from '@tiered-limiter/core';
import type { HttpLimiter } from './limiter.js';
import type { LimitOption } from './options.js';

/**
 * A route's own limit: its limiter (or its `limit`, built with the middleware's
 * `createLimiter`), and optionally its own cost and key.
 */
export interface RouteLimit<Req> {
  /** The limiter of this route. One of `limiter` and `limit` is required. */
  limiter?: HttpLimiter;
  /** The limits of this route, or a function of the request picking them; see `limit`. */
  limit?: LimitOption<Req>;
  /**
   * Tokens a request takes: a number, or a function of the request.
   * @default the middleware's `cost`, else 1
   */
  cost?: number | ((req: Req) => number);
  /**
   * The key a request is counted under.
   * @default the middleware's `key`, else the client's address
   */
  key?: (req: Req) => string;
}

/**
 * Limits by route. A name is a path (`/login`), a path with a method (`POST /login`), or a
 * prefix ending in `/*` (`/api/*` is `/api` and everything under it); the value is a limiter, a
 * `RouteLimit`, or `false` for a path that is not limited at all (`'/api/health': false`). Paths
 * are compared without query, case-insensitively, with repeated and trailing slashes ignored,
 * backslashes read as slashes and percent-escapes decoded, so that a spelling a router would still
 * send to the handler (`/Login/`, `/log%69n`) cannot dodge the route's limit. Under `createRateLimit`
 * and `createRateLimitCheck`, whose router may be a URL parser (`new URL(req.url, base)`), the path
 * it routes is looked up too (`/x/../login` and `//host/login` are `/login` to it). A `HEAD` request counts against the
 * `GET` route of its path, since frameworks answer it with the `GET` handler. The most specific
 * name wins: an exact path before a prefix, a longer prefix before a shorter one, a name with
 * the method before one without.
 */
export type RouteLimits<Req> = Readonly<Record<string, HttpLimiter | RouteLimit<Req> | false>>;

interface PrefixRoute<T> {
  readonly method: string | undefined;
  readonly prefix: string;
  readonly route: T;
}

const METHOD = /^([A-Za-z]+)\s+(\S+)$/;
/** A query, a fragment, a `:param` segment, or a `*` that is not a final `/*`. */
const NEVER_MATCHES = /[?#]|\/:|\*(?!$)|[^/]\*$/;

/** The compiled `routes` option: finds a request's route limit in one map lookup or a short scan. */
export class RouteTable<T> {
  readonly #exact = new Map<string, T>();
  readonly #prefixes: PrefixRoute<T>[] = [];

  /** `resolve` turns each route's value into what `find` answers, checking it. */
  constructor(routes: unknown, resolve: (name: string, value: unknown) => T) {
    if (routes === null || typeof routes !== 'object' || Array.isArray(routes)) {
      throw new ConfigError('routes', routes, 'an object of route names to limiters');
    }
    for (const [name, value] of Object.entries(routes)) {
      const route = resolve(name, value);
      const match = METHOD.exec(name.trim());
      const method = match ? match[1]!.toUpperCase() : undefined;
      const path = match ? match[2]! : name.trim();
      if (!path.startsWith('/')) throw new ConfigError(`routes['${name}']`, name, "a path starting with '/'");
      // Names match paths literally, and a request's path has no query: such a name never matched.
      if (NEVER_MATCHES.test(path)) {
        throw new ConfigError(
          `routes['${name}']`,
          name,
          'a literal path: no query or fragment, no `:param`, and no `*` but a final `/*` (a prefix)',
        );
      }
      if (path.endsWith('/*')) {
        const prefix = normalizePath(path.slice(0, -2));
        if (this.#prefixes.some((p) => p.method === method && p.prefix === prefix)) collides(name);
        this.#prefixes.push({ method, prefix, route });
      } else {
        const exact = `${method ?? '*'} ${normalizePath(path)}`;
        if (this.#exact.has(exact)) collides(name);
        this.#exact.set(exact, route);
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

  /**
   * The route limit of a request, or `undefined` when no route names it. With `resolving`, the
   * router behind the middleware may read the target as a URL parser does (WHATWG `new URL(req.url,
   * base)`, which Node's documentation shows): `.` and `..` segments (`%2e` too) resolved, and a
   * leading `//host` taken for an authority. The path it would route is then looked up as well,
   * and a limit it finds wins over none, or over a less specific one.
   */
  find(method: string | undefined, url: string | undefined, resolving = false): T | undefined {
    const target = url ?? '/';
    const verb = (method ?? 'GET').toUpperCase();
    const path = normalizePath(pathOf(target));
    const found = this.#lookup(verb, path);
    if (!resolving) return found?.route;
    const resolved = resolvedPath(target);
    if (resolved === undefined || resolved === path) return found?.route;
    const other = this.#lookup(verb, resolved);
    const limits = (f: Found<T> | undefined): f is Found<T> => f !== undefined && f.route !== false;
    return limits(other) && (!limits(found) || other.rank > found.rank) ? other.route : found?.route;
  }

  #lookup(verb: string, path: string): Found<T> | undefined {
    // HEAD is answered by the GET handler (Express, Fastify, and RFC 9110 §9.3.2): it counts there.
    const exact =
      this.#exact.get(`${verb} ${path}`) ?? (verb === 'HEAD' ? this.#exact.get(`GET ${path}`) : undefined);
    if (exact !== undefined) return { route: exact, rank: EXACT_RANK + 1 };
    const any = this.#exact.get(`* ${path}`);
    if (any !== undefined) return { route: any, rank: EXACT_RANK };
    for (const entry of this.#prefixes) {
      if (
        entry.method !== undefined &&
        entry.method !== verb &&
        !(verb === 'HEAD' && entry.method === 'GET')
      ) {
        continue;
      }
      if (path === entry.prefix || path.startsWith(entry.prefix === '/' ? '/' : `${entry.prefix}/`)) {
        return { route: entry.route, rank: entry.prefix.length * 2 + Number(entry.method !== undefined) };
      }
    }
    return undefined;
  }
}

/** A route found for a path, and how specific its name is: the higher, the more. */
interface Found<T> {
  readonly route: T;
  readonly rank: number;
}

/** The rank of an exact name: above any prefix's (a prefix ranks by its length and method). */
const EXACT_RANK = Number.MAX_SAFE_INTEGER - 1;

/** A request target's scheme and authority (`http://host:port`): its absolute form (RFC 9112 §3.2.2). */
const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i;

/**
 * The path of a request target, without query or fragment. An absolute-form target
 * (`POST http://host/login`) is routed by Express and Fastify to its path, so it is matched by it.
 */
function pathOf(target: string): string {
  const absolute = ABSOLUTE_FORM.exec(target);
  const url = absolute === null ? target : target.slice(absolute[0].length) || '/';
  let end = url.length;
  const query = url.indexOf('?');
  if (query !== -1) end = query;
  const hash = url.indexOf('#');
  if (hash !== -1 && hash < end) end = hash;
  return url.slice(0, end);
}

/** A target a URL parser may route elsewhere: a dot segment, or `//` (a slash or backslash) in front. */
const RESOLVABLE = /[/\\]\.|%2e|^[/\\]{2}/i;

/**
 * The path a URL parser routes `target` to (`new URL(target, base).pathname`), normalized, when
 * it may differ from the path as sent; else `undefined`.
 */
function resolvedPath(target: string): string | undefined {
  if (!RESOLVABLE.test(target)) return undefined;
  try {
    return normalizePath(new URL(target, 'http://localhost').pathname);
  } catch {
    return undefined;
  }
}

/** Lower case, percent-escapes decoded, backslashes as slashes, repeated and trailing slashes dropped. */
export function normalizePath(path: string): string {
  let out = path;
  if (out.includes('%')) {
    try {
      out = decodeURIComponent(out);
    } catch {
      // A malformed escape: compare it as written.
    }
  }
  // A backslash is a slash to a URL parser, and to Express once a `#` sends the target through
  // Node's legacy url.parse (`/login\\#` reaches `/login`).
  out = out
    .toLowerCase()
    .replace(/\\/g, '/')
    .replace(/\/{2,}/g, '/');
  if (out.length > 1 && out.endsWith('/')) out = out.replace(/\/+$/, '') || '/';
  return out.startsWith('/') ? out : `/${out}`;
}

/** Two route names that match the same requests: the second would silently replace the first. */
function collides(name: string): never {
  throw new ConfigError(
    `routes['${name}']`,
    name,
    'a route no other name already gives (names are matched lower-cased, escapes decoded, trailing slashes dropped)',
  );
}
