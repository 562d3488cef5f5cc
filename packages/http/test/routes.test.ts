import type { IncomingMessage } from 'node:http';
import { perSecond } from '@tiered-limiter/core';
import { clientIp, ipKey } from '@tiered-limiter/http';
import { describe, expect, it } from 'vitest';
import { normalizePath, RouteTable } from '../src/routes.js';

function message(remoteAddress: string | undefined, forwarded?: string): IncomingMessage {
  return {
    socket: { remoteAddress },
    headers: forwarded === undefined ? {} : { 'x-forwarded-for': forwarded },
  } as unknown as IncomingMessage;
}

/** A route's value stands for itself: the table only finds it. */
function limiter(name: string) {
  return { name, limits: [perSecond(1, { name })] };
}

function table<T>(routes: Record<string, T>): RouteTable<T> {
  return new RouteTable(routes, (_name, value) => value as T);
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

  it('believes a trusted proxy’s entry when the socket has no address (closed, or a Fetch request given none)', () => {
    expect(clientIp(message(undefined, '203.0.113.9, 10.0.0.2'), 1)).toBe('10.0.0.2');
    expect(clientIp(message(undefined, '203.0.113.9'), 0)).toBe('unknown');
    expect(clientIp(message(undefined), 1)).toBe('unknown');
  });

  it('drops the port of a forwarded hop that carries one, so a client has one key', () => {
    expect(clientIp(message('10.0.0.1', '192.0.2.9:1234'), 1)).toBe('192.0.2.9');
    expect(clientIp(message('10.0.0.1', '[2001:db8:2::1]:443'), 1)).toBe('2001:db8:2::1');
    expect(clientIp(message('10.0.0.1', '2001:db8:2::1'), 1)).toBe('2001:db8:2::1');
  });

  it('drops the brackets of a forwarded IPv6 hop without a port, so it keys by its /56 as the bare one does', () => {
    const forwarded = clientIp(message('10.0.0.1', '198.51.100.1, [2001:db8:2::1]'), 1);
    expect(forwarded).toBe('2001:db8:2::1');
    expect(ipKey(forwarded)).toBe('2001:db8:2::/56');
  });
});

describe('RouteTable', () => {
  const login = limiter('login');
  const postLogin = limiter('postlogin');
  const api = limiter('api');
  const report = limiter('report');
  const all = limiter('all');
  const routes = table<unknown>({
    '/login': login,
    'POST /login': { limiter: postLogin, cost: 2 },
    '/api/*': api,
    'GET /api/report/*': report,
    'GET /export': report,
    '/*': all,
  });
  const find = (method: string, url: string) => routes.find(method, url) as { limiter?: unknown } | undefined;

  it('prefers the exact path, with its method first, then the longest prefix', () => {
    expect(find('GET', '/login')).toBe(login);
    expect(find('POST', '/login')).toMatchObject({ limiter: postLogin, cost: 2 });
    expect(find('GET', '/api')).toBe(api);
    expect(find('GET', '/api/items?page=2')).toBe(api);
    expect(find('GET', '/api/report/7')).toBe(report);
    expect(find('DELETE', '/api/report/7')).toBe(api);
    expect(find('GET', '/apix')).toBe(all);
  });

  it('between two prefixes of one path, takes the one with the request’s method, whichever is written first', () => {
    const writes = limiter('writes');
    const reads = limiter('reads');
    for (const order of [
      { '/data/*': reads, 'POST /data/*': writes },
      { 'POST /data/*': writes, '/data/*': reads },
    ]) {
      const prefixes = table<unknown>(order);
      expect(prefixes.find('POST', '/data/7')).toBe(writes);
      expect(prefixes.find('GET', '/data/7')).toBe(reads);
    }
  });

  it('finds the GET route for a HEAD request, exact or by prefix', () => {
    expect(find('HEAD', '/export')).toBe(report);
    expect(find('HEAD', '/api/report/7')).toBe(report);
    expect(find('POST', '/export')).toBe(all);
    expect(table({ 'HEAD /x': 1, 'GET /x': 2 }).find('HEAD', '/x')).toBe(1);
  });

  it('matches the spellings a router sends to the same handler', () => {
    for (const url of ['/Login', '/login/', '//login', '/log%69n', '/login?x=1', '/login#top']) {
      expect(find('GET', url), url).toBe(login);
    }
    // The absolute form (RFC 9112 §3.2.2), which Express and Fastify route by its path.
    for (const url of ['http://127.0.0.1:3000/login', 'HTTPS://example.com/Login/?x=1']) {
      expect(find('GET', url), url).toBe(login);
    }
    expect(find('GET', 'http://example.com')).toBe(all);
    expect(normalizePath('/A//b/%7e/')).toBe('/a/b/~');
    expect(normalizePath('/bad%zz')).toBe('/bad%zz');
  });

  it('reads a backslash as a slash: a URL parser does, and Express once a `#` sends the target through url.parse', () => {
    for (const url of ['/login\\', '/login\\#x', '/LOGIN\\?x=1']) expect(find('GET', url), url).toBe(login);
    expect(find('GET', '/api\\items')).toBe(api);
  });

  it('also looks up the path a URL parser routes, when the router may be one, and takes a limit over none', () => {
    const parsed = table<unknown>({ 'POST /login': postLogin, '/api/*': api, '/health': false });
    const spellings = [
      '//evil/login',
      '/x/../login',
      '/x/%2E%2e/login',
      '/\\evil/login',
      '/./login',
      '/login/.',
      'http://h/x/../login',
    ];
    for (const url of spellings) {
      expect(parsed.find('POST', url, true), url).toBe(postLogin);
      // Express and Fastify route them as sent, to no /login handler.
      expect(parsed.find('POST', url), url).toBeUndefined();
    }
    // Of two limits, the more specific name's; a literal router keeps the path it routes.
    expect(parsed.find('POST', '/api/../login', true)).toBe(postLogin);
    expect(parsed.find('POST', '/api/../login')).toBe(api);
    // An exemption the parsed path finds never lifts the limit of the path as sent, nor the default.
    expect(parsed.find('GET', '/api/../health', true)).toBe(api);
    expect(parsed.find('GET', '/x/../health', true)).toBeUndefined();
    expect(parsed.find('GET', '/api/./items', true)).toBe(api);
  });

  it('answers undefined when no route names the request', () => {
    expect(table({ '/login': login }).find('GET', '/other')).toBeUndefined();
  });

  it('refuses a bad route at construction, naming it', () => {
    expect(() => table({ login })).toThrow(/routes\['login'\]/);
    // Two names for the same requests: the second would silently replace the first.
    expect(() => table({ '/login': login, '/Login/': false })).toThrow(/routes\['\/Login\/'\]/);
    expect(() => table({ 'GET /a/*': login, 'get /A/*': login })).toThrow(/routes\['get \/A\/\*'\]/);
    expect(() => table({ 'GET /login': login, 'POST /login': login, '/login': login })).not.toThrow();
    expect(() => new RouteTable([] as never, () => 0)).toThrow(/`routes`/);
    // Names no request path can match (paths are literal, and compared without their query).
    for (const name of ['/search?q=x', 'GET /users/:id', '/api*', '/a/*/b', '/page#top']) {
      expect(() => table({ [name]: login }), name).toThrow(`routes['${name}']`);
    }
    expect(() => table({ '/*': login, '/v1/models/x:predict': login, 'GET /api/*': login })).not.toThrow();
  });
});
