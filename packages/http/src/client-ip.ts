import { ArgumentError } from '@tiered-limiter/core';
import { UNKNOWN_CLIENT_KEY } from './defaults.js';
import type { RawRequest } from './raw-request.js';

const MAPPED_V4 = /^::ffff:(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})$/i;
/**
 * A forwarded hop with a port, `192.0.2.9:1234` or `[2001:db8::1]:443`, or an IPv6 one in brackets
 * without (`[2001:db8::1]`): some proxies write them so.
 */
const WITH_PORT = /^(?:\[([0-9a-f:.]+)\](?::\d+)?|(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}):\d+)$/i;

/**
 * The client's IP address: the socket's peer, or, with `trustProxy` hops, the address the
 * outermost trusted proxy saw, read from the right of `X-Forwarded-For`.
 *
 * `trustProxy` counts the proxies in front of the server that each append the address they
 * received from. With 1 (one load balancer), the last entry of `X-Forwarded-For` is the client;
 * with 2, the one before it; entries further left are whatever the client wrote, and never
 * read. An IPv4 address seen through an IPv6 socket (`::ffff:192.0.2.1`) is given as IPv4, so
 * a client has one key whichever way it connected; a forwarded hop's port and brackets (`192.0.2.9:1234`,
 * `[2001:db8::1]:443`, `[2001:db8::1]`) are dropped, so one client is one key whatever port it came from. A
 * socket with no address (closed, or a Fetch `Request` given none) gives `'unknown'`, unless a trusted
 * proxy's entry names the client. The default key is `ipKey(clientIp(req, trustProxy), ipv6Subnet)`.
 *
 * @example
 * const ip = clientIp(req); // '127.0.0.1'
 * const behindLoadBalancer = clientIp(req, 1);
 */
export function clientIp(req: RawRequest, trustProxy = 0): string {
  // The middleware checks its own option; a caller's 1.5 read hops[0.5], and the request threw a
  // TypeError once an X-Forwarded-For arrived.
  if (!(Number.isInteger(trustProxy) && trustProxy >= 0)) {
    throw new ArgumentError('trustProxy', trustProxy, 'a whole number from 0 (trusted proxies in front)');
  }
  let address = req.socket.remoteAddress;
  // A trusted proxy's entry names the client whether or not the peer's address is known: a Fetch
  // `Request` comes with none unless the server passes it on.
  if (trustProxy > 0) {
    const forwarded = req.headers['x-forwarded-for'];
    if (forwarded !== undefined) {
      const hops = (Array.isArray(forwarded) ? forwarded.join(',') : forwarded).split(',');
      // hops[length - 1] was appended by the proxy nearest to us; each trusted proxy vouches for one more.
      const index = Math.max(0, hops.length - trustProxy);
      const hop = hops[index]!.trim();
      const ported = WITH_PORT.exec(hop);
      if (ported) address = ported[1] ?? ported[2]!;
      else if (hop !== '') address = hop;
    }
  }
  if (address === undefined) return UNKNOWN_CLIENT_KEY;
  const mapped = MAPPED_V4.exec(address);
  return mapped ? mapped[1]! : address;
}
