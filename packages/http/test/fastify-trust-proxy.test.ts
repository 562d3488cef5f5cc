/**
 * Fastify's own `trustProxy`: the default key is Fastify's `request.ip`, as @fastify/rate-limit's
 * is, while the hook's `trustProxy` is 0; a `trustProxy` of the hook's own wins. Driven with
 * `inject`, whose peer address is 127.0.0.1: the proxy in front of two clients.
 */
import { defineLimit } from '@tiered-limiter/core';
import { fastifyRateLimit, type RateLimitInfo, type RateLimitOptions } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import Fastify, { type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from './teardown.js';

const apps: FastifyInstance[] = [];
const closers: (() => Promise<void>)[] = [];
closeAfterEach(apps, closers);

/** One request per client, then the bucket is empty: a second request under one key is refused. */
const ONE = defineLimit({ capacity: 1, refillPerSecond: 0.001, name: 'one' });

/** What `trustProxy` Fastify is given; a number is typed out of Fastify ≥ 5.12.1 but still taken. */
type FastifyTrust = FastifyServerOptions['trustProxy'] | number;

/**
 * A Fastify app with `trustProxy: trust`, limited by the hook with `options`; answers each
 * `X-Forwarded-For` in turn and gives `status key` of each (the key the request was counted
 * under; `-` when none was).
 */
async function keysBehindProxy(
  trust: FastifyTrust,
  forwarded: readonly string[],
  options: Partial<RateLimitOptions<FastifyRequest>> = {},
): Promise<string[]> {
  const limiter = new RequestLimiter({ store: new MemoryStore(), limits: ONE, failurePolicy: 'open' });
  closers.push(() => limiter.close());
  const app = Fastify({ trustProxy: trust as FastifyServerOptions['trustProxy'] });
  apps.push(app);
  app.addHook('onRequest', fastifyRateLimit<FastifyRequest>({ limiter, ...options }));
  app.get('/', async () => 'ok');
  const seen: string[] = [];
  // The request property is set on admissions and denials alike; none when nothing counted it.
  app.addHook('onResponse', async (request, reply) => {
    const info = (request as FastifyRequest & { rateLimit?: RateLimitInfo }).rateLimit;
    seen.push(`${reply.statusCode} ${info?.key ?? '-'}`);
  });
  for (const header of forwarded) await app.inject({ url: '/', headers: { 'x-forwarded-for': header } });
  return seen;
}

/** The codes of the tiered-limiter process warnings raised while `run` runs. */
async function warningsWhile(run: () => Promise<void>): Promise<string[]> {
  const warnings: string[] = [];
  const onWarning = (warning: Error & { code?: string }) => {
    if (warning.code?.startsWith('TL_')) warnings.push(warning.code);
  };
  process.on('warning', onWarning);
  try {
    await run();
    // Node emits a process warning on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', onWarning);
  }
  return warnings;
}

/** Two clients behind the proxy, each once. */
const TWO_CLIENTS = ['198.51.100.1', '198.51.100.2'];
const APART = ['200 198.51.100.1', '200 198.51.100.2'];
const TOGETHER = ['200 127.0.0.1', '429 127.0.0.1'];

describe("fastifyRateLimit and Fastify's trustProxy", () => {
  it.each<[string, FastifyTrust]>([
    ['true', true],
    ['an address list', ['127.0.0.1']],
    ['a comma-separated string', '127.0.0.1, 10.0.0.0/8'],
    ['a function of the address', (address: string) => address === '127.0.0.1'],
  ])('trustProxy %s: two clients behind the trusted proxy are limited apart', async (_name, trust) => {
    const warnings = await warningsWhile(async () => {
      expect(await keysBehindProxy(trust, TWO_CLIENTS)).toEqual(APART);
    });
    expect(warnings).toEqual([]);
  });

  it('trustProxy off: both are keyed by the proxy and share its limit, with the warning', async () => {
    const warnings = await warningsWhile(async () => {
      expect(await keysBehindProxy(false, TWO_CLIENTS)).toEqual(TOGETHER);
      expect(await keysBehindProxy(undefined, TWO_CLIENTS)).toEqual(TOGETHER);
    });
    expect(warnings).toEqual(['TL_HTTP_UNTRUSTED_FORWARDED_FOR', 'TL_HTTP_UNTRUSTED_FORWARDED_FOR']);
  });

  it('a hop count: what Fastify makes of it is the key (≥ 5.12.1 trusts no hop count: together), with the warning', async () => {
    // Fastify 5.12.1 dropped hop-count trust (a direct client could forge the hops); `request.ip`
    // is then the peer. The key follows Fastify, as @fastify/rate-limit's does, rather than
    // counting hops Fastify refused to count; the warning tells of the header nothing believed.
    const warnings = await warningsWhile(async () => {
      expect(await keysBehindProxy(1, TWO_CLIENTS)).toEqual(TOGETHER);
    });
    expect(warnings).toEqual(['TL_HTTP_UNTRUSTED_FORWARDED_FOR']);
  });

  it("the hook's own trustProxy wins over Fastify's", async () => {
    // Fastify trusting everything reads the leftmost entry (what the client wrote); one hop of
    // ours reads the rightmost (what the proxy appended).
    const chain = ['198.51.100.1, 203.0.113.5', '198.51.100.2, 203.0.113.5'];
    expect(await keysBehindProxy(true, chain)).toEqual(APART);
    expect(await keysBehindProxy(true, chain, { trustProxy: 1 })).toEqual([
      '200 203.0.113.5',
      '429 203.0.113.5',
    ]);
  });

  it("allowList compares Fastify's request.ip when Fastify trusts the proxy", async () => {
    const seen = await keysBehindProxy(true, ['198.51.100.1', '198.51.100.1', '203.0.113.5'], {
      allowList: ['198.51.100.0/24'],
    });
    expect(seen).toEqual(['200 -', '200 -', '200 203.0.113.5']);
  });
});
