import type { IncomingHttpHeaders } from 'node:http';

/**
 * What the check reads of a request beside the framework's own object: the method and path the
 * route table matches, `X-Forwarded-For`, and the socket's peer address for the default key.
 * Node's `IncomingMessage` is one (the same object for Node `http` and Express; Fastify's
 * `request.raw`); `fetchRateLimit` makes one from a Fetch `Request`.
 */
export interface RawRequest {
  /** The request method (`GET`): a route named `GET /path` also counts `HEAD`. */
  readonly method?: string | undefined;
  /** The path and query as sent (`/items?page=2`). */
  readonly url?: string | undefined;
  /** The request headers by lower-case name: `x-forwarded-for` is the one read. */
  readonly headers: IncomingHttpHeaders;
  /** The connection: its peer's address is the client's, unless `trustProxy` says otherwise. */
  readonly socket: {
    /** The peer's IP address; `undefined` once the socket closed, or when the server gave none. */
    readonly remoteAddress?: string | undefined;
  };
}
