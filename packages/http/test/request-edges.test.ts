/**
 * Requests at the edges, on every adapter over real sockets: an absolute-form target (a route's
 * limit still applies), a client that leaves while its decision is awaited (its tokens come back
 * under `skipFailedRequests`), and a limiter closed while a response runs (no crash, a warning).
 */
import { connect } from 'node:net';
import {
  type BucketOp,
  type BucketReply,
  defineLimit,
  type GlobalStore,
  type LimitSpec,
  perMinute,
} from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { afterEach, describe, expect, it } from 'vitest';
import { ADAPTERS, type ContractOptions, closeApps } from './adapters.js';
import { tokensIn } from './helpers.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await closeApps();
  await Promise.all(closers.splice(0).map((close) => close()));
});

const API = defineLimit({ capacity: 3, refillPerSecond: 0.001, name: 'api' });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `done()` holds, 2 s at most. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !done(); i++) await sleep(5);
}

/** A store whose every answer comes `delayMs` late: a decision awaited that long. */
class SlowStore implements GlobalStore {
  readonly #inner = new MemoryStore();
  readonly #delayMs: number;

  constructor(delayMs: number) {
    this.#delayMs = delayMs;
  }

  async apply(op: BucketOp): Promise<BucketReply> {
    await sleep(this.#delayMs);
    return this.#inner.apply(op);
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#inner.reset(key, limits);
  }
}

/** The status of one request written by hand, with `target` as its request target. */
function statusOfRawRequest(url: string, method: string, target: string): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(
        `${method} ${target} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
      );
    });
    let head = '';
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString();
      const match = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (match) {
        resolve(Number(match[1]));
        socket.destroy();
      }
    });
    socket.on('error', reject);
  });
}

describe.each(ADAPTERS)('requests at the edges, $name', (adapter) => {
  it('an absolute-form target meets the limit of the route its path names', async () => {
    const login = new RequestLimiter({
      store: new MemoryStore(),
      limits: perMinute(1, { name: 'login' }),
      failurePolicy: 'closed',
    });
    closers.push(() => login.close());
    const { url } = await adapter.start({ routes: { 'POST /login': login } } as ContractOptions);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push(await statusOfRawRequest(url, 'POST', `${url}/login`));
    expect(statuses).toEqual([200, 429, 429]);
  });

  it('a client gone before its decision came: skipFailedRequests gives its tokens back', async () => {
    const store = new SlowStore(200);
    const limiter = new RequestLimiter({ store, limits: API, failurePolicy: 'open', timeoutMs: 5000 });
    closers.push(() => limiter.close());
    const { url } = await adapter.start({ limiter, skipFailedRequests: true } as ContractOptions);
    const gone = new AbortController();
    const asked = fetch(`${url}/items`, { signal: gone.signal }).catch(() => undefined);
    await sleep(50);
    gone.abort();
    await asked;
    // The decision lands 150 ms later, admitted, on a response already closed: a failed one.
    await sleep(400);
    expect(await tokensIn(store, '127.0.0.1', [API])).toBe(3);
  });

  it('a limiter closed while a response runs: the refund warns, nothing throws', async () => {
    const limiter = new RequestLimiter({ store: new MemoryStore(), limits: API, failurePolicy: 'open' });
    const app = await adapter.start({ limiter, skipFailedRequests: true } as ContractOptions);
    const warnings: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => warnings.push(warning.code ?? '');
    process.on('warning', onWarning);
    try {
      const gone = new AbortController();
      const asked = fetch(`${app.url}/stall`, { signal: gone.signal }).catch(() => undefined);
      await until(() => app.handled() > 0);
      await limiter.close();
      gone.abort();
      await asked;
      await until(() => app.abandoned() > 0);
      await sleep(20);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).toContain('TL_HTTP_REWARD_FAILED');
  });
});
