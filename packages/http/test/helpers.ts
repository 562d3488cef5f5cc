import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BucketOp, BucketReply, Clock, GlobalStore, LimitSpec } from '@tiered-limiter/core';
import type { HttpLimiter } from '@tiered-limiter/http';
import { LocalLimiter, type LocalLimiterOptions, MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { parseList } from 'structured-headers';
import { expect, vi } from 'vitest';

/** A store that answers through a real one until `failing` is set, then rejects every call. */
export class FlakyStore implements GlobalStore {
  failing = false;
  readonly #inner: GlobalStore;

  constructor(inner: GlobalStore) {
    this.#inner = inner;
  }

  apply(op: BucketOp): Promise<BucketReply> {
    return this.failing ? this.#refuse() : this.#inner.apply(op);
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.failing ? this.#refuse() : this.#inner.reset(key, limits);
  }

  #refuse(): Promise<never> {
    return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
  }
}

/** A store whose every answer comes `delayMs` late: a decision awaited that long. */
export class SlowStore implements GlobalStore {
  readonly #inner = new MemoryStore();
  readonly #delayMs: number;

  constructor(delayMs: number) {
    this.#delayMs = delayMs;
  }

  async apply(op: BucketOp): Promise<BucketReply> {
    await new Promise((resolve) => setTimeout(resolve, this.#delayMs));
    return this.#inner.apply(op);
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#inner.reset(key, limits);
  }
}

/** Whole tokens `key` has left in `store`, taking nothing. */
export async function tokensIn(
  store: GlobalStore,
  key: string,
  limits: readonly LimitSpec[],
): Promise<number> {
  return (await store.apply({ key, limits })).remaining;
}

/** `LocalLimiter` as an `HttpLimiter` (it has no `consume`): real bucket math, in process, exact names. */
export function localHttpLimiter(options: LocalLimiterOptions): HttpLimiter {
  const local = new LocalLimiter(options);
  return {
    limits: local.limits,
    tryConsume: (key, cost) => local.tryConsume(key, cost),
    consume: async (key, cost) => local.tryConsume(key, cost),
  };
}

/**
 * A two-tier limiter on a `MemoryStore`, on `clock`, reading the clock on every decision and alone
 * in its fleet, so that lease decisions are exact.
 */
export function exactTieredLimiter(limits: LimitSpec, clock: Clock): TieredLimiter {
  return new TieredLimiter({
    store: new MemoryStore({ clock }),
    limits,
    failurePolicy: 'open',
    clock,
    instances: 1,
  });
}

/** A server listening on a free loopback port. */
export interface Listening {
  readonly url: string;
  close(): Promise<void>;
}

/** Serves `server` on 127.0.0.1 and a port the OS picks. */
export async function listen(server: Server): Promise<Listening> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** A Node `http` server from a request handler; an error becomes a 500 with its message. */
export function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => Promise<void> | void,
): Promise<Listening> {
  return listen(
    createServer((req, res) => {
      Promise.resolve(handler(req, res)).catch((error: unknown) => {
        res.statusCode = 500;
        res.end(String(error));
      });
    }),
  );
}

/** What a test reads of a response. */
export interface Reply {
  readonly status: number;
  /** The rate-limit headers, `Retry-After` and `Content-Type`, by lower-case name. */
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** One request over a real socket; the body read to the end. */
export async function request(url: string, init?: RequestInit): Promise<Reply> {
  const response = await fetch(url, init);
  const body = await response.text();
  const headers: Record<string, string> = {};
  for (const [name, value] of response.headers) {
    if (/^(ratelimit|retry-after|x-ratelimit|content-type)/.test(name)) headers[name] = value;
  }
  return { status: response.status, headers, body };
}

/** `count` requests one after another (never in parallel, so their order is the order of decisions). */
export async function requestMany(url: string, count: number, init?: RequestInit): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < count; i++) replies.push(await request(url, init));
  return replies;
}

/** One `RateLimit-Policy` item, parsed: draft-ietf-httpapi-ratelimit-headers §3.1. */
export interface PolicyField {
  readonly name: string;
  readonly q: number;
  readonly w: number | undefined;
}

/** One `RateLimit` item, parsed: draft-ietf-httpapi-ratelimit-headers §4.1. */
export interface LimitField {
  readonly name: string;
  readonly r: number;
  readonly t: number | undefined;
}

/**
 * Parses `RateLimit-Policy` with an RFC 9651 parser and checks it against the draft: a non-empty
 * List whose items are Strings; `q` a required non-negative Integer; `w` an optional Integer > 0.
 */
export function parsePolicy(value: string | undefined): PolicyField[] {
  const list = parseList(value ?? '');
  if (list.length === 0) throw new Error('RateLimit-Policy: an empty list');
  return list.map(([item, params]) => {
    if (typeof item !== 'string') throw new Error(`RateLimit-Policy: ${String(item)} is not a String`);
    const q = integer(params.get('q'), 'q', 0);
    if (q === undefined) throw new Error('RateLimit-Policy: q is required');
    return { name: item, q, w: integer(params.get('w'), 'w', 1) };
  });
}

/**
 * Parses `RateLimit` with an RFC 9651 parser and checks it against the draft: a List of String
 * items; `r` a required non-negative Integer; `t` an optional non-negative Integer.
 */
export function parseRateLimit(value: string | undefined): LimitField[] {
  return parseList(value ?? '').map(([item, params]) => {
    if (typeof item !== 'string') throw new Error(`RateLimit: ${String(item)} is not a String`);
    const r = integer(params.get('r'), 'r', 0);
    if (r === undefined) throw new Error('RateLimit: r is required');
    return { name: item, r, t: integer(params.get('t'), 't', 0) };
  });
}

function integer(value: unknown, name: string, min: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new Error(`${name}=${String(value)} is not an Integer from ${min} up`);
  }
  return value;
}

/**
 * Records the limiter calls the middleware makes, in order: `hit` when `tryConsume` answered,
 * `miss` when it did not, `consume` for each `consume`. The `tryConsume` that the two-tier
 * limiter's own `consume` makes inside is not the middleware's, and is left out.
 */
export function watchLimiterCalls(limiter: TieredLimiter): string[] {
  const calls: string[] = [];
  const tryConsume = limiter.tryConsume.bind(limiter);
  const consume = limiter.consume.bind(limiter);
  let inConsume = false;
  vi.spyOn(limiter, 'tryConsume').mockImplementation((key, cost) => {
    const decision = tryConsume(key, cost);
    if (!inConsume) calls.push(decision === undefined ? 'miss' : 'hit');
    return decision;
  });
  vi.spyOn(limiter, 'consume').mockImplementation((key, cost) => {
    calls.push('consume');
    inConsume = true;
    try {
      return consume(key, cost);
    } finally {
      inConsume = false;
    }
  });
  return calls;
}

/**
 * What a middleware did per request, as `seen` recorded it (`hit at once`: the lease answered and
 * the framework's callback ran before the middleware returned; `miss later`: it awaited `consume`)
 * against the limiter's `calls` (`watchLimiterCalls`): `requests` entries, each one of those two, a
 * lease answer among them, and a `consume` for each miss only.
 */
export function expectSynchronousWhenLeased(
  seen: readonly string[],
  calls: readonly string[],
  requests: number,
): void {
  expect(seen.length).toBe(requests);
  for (const entry of seen) expect(['hit at once', 'miss later']).toContain(entry);
  expect(seen).toContain('hit at once');
  expect(calls.filter((call) => call === 'consume').length).toBe(
    seen.filter((e) => e === 'miss later').length,
  );
}
