import { ipKey } from '@tiered-limiter/http';
import { describe, expect, it } from 'vitest';
import { AllowList } from '../src/ip.js';

describe('ipKey', () => {
  it('keys IPv6 by its /56 by default, written as a network in RFC 5952 form', () => {
    expect(ipKey('2001:db8:0:abcd::1')).toBe('2001:db8:0:ab00::/56');
    expect(ipKey('2001:DB8:0:AB01:1:2:3:4')).toBe('2001:db8:0:ab00::/56');
    expect(ipKey('2001:db8:0:ac00::1')).toBe('2001:db8:0:ac00::/56');
    expect(ipKey('::1')).toBe('::/56');
    expect(ipKey('fe80::1%eth0', 64)).toBe('fe80::/64');
  });

  it('keeps as many bits as told: 1 to 128, or every address apart with false', () => {
    expect(ipKey('2001:db8:0:abcd:1::1', 64)).toBe('2001:db8:0:abcd::/64');
    expect(ipKey('2001:db8:ffff::1', 33)).toBe('2001:db8:8000::/33');
    expect(ipKey('2001:db8::1', 1)).toBe('::/1');
    expect(ipKey('2001:0db8:0000:0000:0000:0000:0000:0001', 128)).toBe('2001:db8::1');
    expect(ipKey('2001:db8:0:0:1:0:0:1', false)).toBe('2001:db8::1:0:0:1');
    expect(ipKey('64:ff9b::192.0.2.1', false)).toBe('64:ff9b::c000:201');
  });

  it('gives IPv4, and IPv4-mapped IPv6 in either spelling, as IPv4', () => {
    expect(ipKey('203.0.113.7')).toBe('203.0.113.7');
    expect(ipKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(ipKey('::FFFF:cb00:7107')).toBe('203.0.113.7');
    expect(ipKey('unknown')).toBe('unknown');
  });
});

describe('AllowList', () => {
  it('holds addresses and networks of both families', () => {
    const list = new AllowList(['10.0.0.0/8', '192.0.2.1', '2001:db8::/32', '::1']);
    expect(list.has('10.1.2.3')).toBe(true);
    expect(list.has('11.0.0.1')).toBe(false);
    expect(list.has('192.0.2.1')).toBe(true);
    expect(list.has('2001:db8:1::5')).toBe(true);
    expect(list.has('2001:db9::5')).toBe(false);
    expect(list.has('::1')).toBe(true);
    expect(list.has('unknown')).toBe(false);
  });

  it('refuses an entry it cannot read, naming it', () => {
    expect(() => new AllowList('10.0.0.0/8')).toThrow(/`allowList`/);
    for (const bad of ['10.0.0.0/33', 'localhost', '10.0.0.0/', '::/129', '1.2.3.4/8/9', 7]) {
      expect(() => new AllowList(['127.0.0.1', bad]), String(bad)).toThrow(/`allowList\[1\]`/);
    }
  });
});
