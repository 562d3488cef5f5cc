import type { IncomingMessage } from 'node:http';
import { perSecond } from '@tiered-limiter/core';
import { clientIp, type HttpLimiter } from '@tiered-limiter/http';
import { describe, expect, it } from 'vitest';
import { normalizePath, RouteTable } from '../src/routes.js';

function message(remoteAddress: string | undefined, forwarded?: string): IncomingMessage {
  return {
    socket: { remoteAddress },
    headers: forwarded === undefined ? {} : { 'x-forwarded-for': forwarded },
  } as unknown as IncomingMessage;
}

function limiter(name: string): HttpLimiter {
  return { limits: [perSecond(1, { name })], consume: () => Promise.reject(new Error('not called')) };
}

describe('clientIp', () => {
  it('is the socket peer, IPv4 even through an IPv6 socket', () => {
    expect(clientIp(message('127.0.0.1'))).toBe('127.0.0.1');
    expect(clientIp(message('::ffff:192.0.2.7'))).toBe('192.0.2.7');
    expect(clientIp(message('2001:db8::1'))).toBe('2001:db8::1');
    expect(clientIp(message(undefined))).toBe('unknown');
  });

  it('ignores X-Forwarded-For unless proxies are trusted', () => {
    expect(clientIp(message('10.0.0.1', '203.0.113.9'))).toBe('10.0.0.1');
  });

  it('reads X-Forwarded-For from the right, one entry per trusted proxy', () => {
    const req = message('10.0.0.1', 'forged, 203.0.113.9, 10.0.0.2');
    expect(clientIp(req, 1)).toBe('10.0.0.2');
    expect(clientIp(req, 2)).toBe('203.0.113.9');
    // More trusted hops than entries: the leftmost, as good as the proxies' word.
    expect(clientIp(message('10.0.0.1', '203.0.113.9'), 5)).toBe('203.0.113.9');
    expect(clientIp(message('10.0.0.1'), 1)).toBe('10.0.0.1');
  });
});

describe('RouteTable', () => {
  const login = limiter('login');
  const postLogin = limiter('postlogin');
  const api = limiter('api');
  const report = limiter('report');
  const all = limiter('all');
  const table = new RouteTable({
    '/login': login,
    'POST /login': { limiter: postLogin, cost: 2 },
    '/api/*': api,
    'GET /api/report/*': report,
    '/*': all,
  });

  it('prefers the exact path, with its method first, then the longest prefix', () => {
    expect(table.find('GET', '/login')?.limiter).toBe(login);
    expect(table.find('POST', '/login')).toMatchObject({ limiter: postLogin, cost: 2 });
    expect(table.find('GET', '/api')?.limiter).toBe(api);
    expect(table.find('GET', '/api/items?page=2')?.limiter).toBe(api);
    expect(table.find('GET', '/api/report/7')?.limiter).toBe(report);
    expect(table.find('DELETE', '/api/report/7')?.limiter).toBe(api);
    expect(table.find('GET', '/apix')?.limiter).toBe(all);
  });

  it('matches the spellings a router sends to the same handler', () => {
    for (const url of ['/Login', '/login/', '//login', '/log%69n', '/login?x=1', '/login#top']) {
      expect(table.find('GET', url)?.limiter, url).toBe(login);
    }
    expect(normalizePath('/A//b/%7e/')).toBe('/a/b/~');
    expect(normalizePath('/bad%zz')).toBe('/bad%zz');
  });

  it('answers undefined when no route names the request', () => {
    expect(new RouteTable({ '/login': login }).find('GET', '/other')).toBeUndefined();
  });

  it('refuses a bad route at construction, naming it', () => {
    expect(() => new RouteTable({ login })).toThrow(/routes\['login'\]/);
    expect(() => new RouteTable({ '/x': {} as never })).toThrow(/routes\['\/x'\]/);
    expect(() => new RouteTable({ '/x': { limiter: login, cost: 0 } })).toThrow(/routes\['\/x'\]\.cost/);
  });
});
