import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BucketOp, BucketReply, Clock, GlobalStore, LimitSpec } from '@tiered-limiter/core';

/** A clock the test moves by hand. */
export class FakeClock implements Clock {
  #now: number;

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  advance(ms: number): void {
    this.#now += ms;
  }
}

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

/** A Node `http` server from a request handler. */
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
