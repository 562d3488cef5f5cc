import { ConfigError } from '@tiered-limiter/core';

/** Every option of the middleware, as `RateLimitOptions` declares them. */
export const OPTION_NAMES: readonly string[] = [
  'limiter',
  'limit',
  'createLimiter',
  'maxLimiters',
  'key',
  'cost',
  'routes',
  'skip',
  'allowList',
  'trustProxy',
  'ipv6Subnet',
  'statusCode',
  'message',
  'problem',
  'failClosedStatus',
  'onExceeded',
  'requestPropertyName',
  'skipFailedRequests',
  'skipSuccessfulRequests',
  'standardHeaders',
  'legacyHeaders',
  'degradedHeader',
];

/** The options of one route in `routes` (and of Fastify's `config.rateLimit`). */
export const ROUTE_OPTION_NAMES: readonly string[] = ['limiter', 'limit', 'cost', 'key'];

const WINDOW =
  'not set: a window and a count are one limit here, given to the limiter ' +
  "(`limiter: new RequestLimiter({ store, limits: perMinute(100), failurePolicy: 'open' })`) " +
  'or built from `limit: perMinute(100)` with `createLimiter`';

/**
 * Options of express-rate-limit, @fastify/rate-limit and rate-limiter-flexible that have another
 * name or another place here, with what to write instead.
 */
const MIGRANTS: Readonly<Record<string, string>> = {
  windowMs: WINDOW,
  max: WINDOW,
  timeWindow: WINDOW,
  points: WINDOW,
  duration: WINDOW,
  keyGenerator: 'not set: use `key` instead, a function `(req) => string`',
  store: 'not set: the store belongs to the limiter (`new RequestLimiter({ store, ... })`)',
  whitelist: 'not set: use `allowList` (IP addresses and CIDR ranges) or `skip: (req) => boolean`',
  onLimitReached: 'not set: use `onExceeded` instead, `(req, denial) => void`, called on every denial',
  errorResponseBuilder:
    'not set: the body of a denial is `message` (a string, an object or a function) or `problem`',
  requestWasSuccessful:
    'not set: `skipFailedRequests`/`skipSuccessfulRequests` count a status below 400 as success',
  headers: 'not set: use `standardHeaders` (draft-11, draft-10 or false) and `legacyHeaders` (X-RateLimit-*)',
  draft_polli_ratelimit_headers: 'not set: use `standardHeaders` (draft-11, draft-10 or false)',
  enableDraftSpec: 'not set: use `standardHeaders` (draft-11, draft-10 or false)',
  addHeaders: 'not set: use `standardHeaders` and `legacyHeaders` (and `degradedHeader`)',
  addHeadersOnExceeding: 'not set: use `standardHeaders` and `legacyHeaders` (and `degradedHeader`)',
  keyPrefix: "not set: a key prefix belongs to the limiter's store (`new RedisStore({ redis, prefix })`)",
  nameSpace: "not set: a key prefix belongs to the limiter's store (`new RedisStore({ redis, prefix })`)",
  passOnStoreError: "not set: what happens without the store is the limiter's `failurePolicy` ('open')",
  skipOnError: "not set: what happens without the store is the limiter's `failurePolicy` ('open')",
  blockDuration: 'not set: block a key with `limiter.block(key, ms)` on the limiter',
  validate: 'not set: every option is checked when the middleware is made',
  global:
    "not set: add the hook for every route (`app.addHook('onRequest', ...)`) or give routes `config.rateLimit`",
  hook: "not set: add the middleware to the hook you want (`app.addHook('onRequest', ...)`)",
};

/**
 * Throws a `ConfigError` for the first own key of `options` that is not in `known`, naming what
 * to write instead: another package's option with its equivalent here, else the nearest known
 * name. JavaScript callers and migrants would otherwise see an option silently ignored.
 */
export function assertKnownOptions(where: string, options: object, known: readonly string[]): void {
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const option = where === '' ? name : `${where}.${name}`;
    const value = (options as Record<string, unknown>)[name];
    const hint = MIGRANTS[name];
    if (hint !== undefined) throw new ConfigError(option, value, hint);
    const near = nearest(name, known);
    throw new ConfigError(
      option,
      value,
      near === undefined
        ? `not set: it is not an option (known: ${known.join(', ')})`
        : `not set: it is not an option; did you mean \`${near}\`?`,
    );
  }
}

/** The known name closest to `name` by edit distance, if within a third of its length (at least 2). */
function nearest(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(name.length / 3)) + 1;
  for (const candidate of known) {
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance, with a transposition of neighbours counted as one edit. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    rows.push([i]);
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        rows[0]!.push(j);
        continue;
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      }
      rows[i]!.push(d);
    }
  }
  return rows[a.length]![b.length]!;
}
