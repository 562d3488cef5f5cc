import type { IncomingMessage } from 'node:http';
import { ArgumentError } from '@tiered-limiter/core';
import { clientIp, ipKey } from '@tiered-limiter/http';
import { describe, expect, it } from 'vitest';

/** A request from `peer` that came through proxies which wrote `forwarded`. */
function request(peer: string, forwarded?: string): IncomingMessage {
  const headers = forwarded === undefined ? {} : { 'x-forwarded-for': forwarded };
  return { socket: { remoteAddress: peer }, headers } as unknown as IncomingMessage;
}

describe('ipKey and clientIp refuse what their own middleware option would', () => {
  it.each([0, -1, 129, 56.5, Number.NaN, '56', true])(
    'ipKey refuses ipv6Subnet %s by an ArgumentError',
    (subnet) => {
      const call = () => ipKey('2001:db8:0:abcd::1', subnet as number);
      expect(call).toThrow(ArgumentError);
      expect(call).toThrow(/ipv6Subnet/);
    },
  );

  it('ipKey still takes 1 to 128 and false', () => {
    expect(ipKey('2001:db8:0:abcd::1')).toBe('2001:db8:0:ab00::/56');
    expect(ipKey('2001:db8:0:abcd::1', 1)).toBe('::/1');
    expect(ipKey('2001:db8:0:abcd::1', 128)).toBe('2001:db8:0:abcd::1');
    expect(ipKey('2001:db8:0:abcd::1', false)).toBe('2001:db8:0:abcd::1');
  });

  it.each([1.5, -1, Number.NaN, Number.POSITIVE_INFINITY, '1', true])(
    'clientIp refuses trustProxy %s by an ArgumentError, rather than a TypeError on a forwarded request',
    (trustProxy) => {
      const call = () => clientIp(request('10.0.0.1', '203.0.113.7, 10.0.0.2'), trustProxy as number);
      expect(call).toThrow(ArgumentError);
      expect(call).toThrow(/trustProxy/);
    },
  );

  it('clientIp still takes whole numbers from 0', () => {
    const req = request('10.0.0.1', '203.0.113.7, 10.0.0.2');
    expect(clientIp(req)).toBe('10.0.0.1');
    expect(clientIp(req, 1)).toBe('10.0.0.2');
    expect(clientIp(req, 2)).toBe('203.0.113.7');
    expect(clientIp(req, 5)).toBe('203.0.113.7');
  });
});
