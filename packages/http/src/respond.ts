import type { ServerResponse } from 'node:http';
import { constants, Http2ServerResponse } from 'node:http2';
import type { RateLimitOutcome } from './options.js';

/**
 * Writes an outcome of `createRateLimitCheck` to a Node response: the headers; on a denial the
 * status and body, ending the response (or `handler`, when given, which then answers); on an
 * admission, watches the response so that `skipFailedRequests`/`skipSuccessfulRequests` can give
 * the tokens back. Takes Node's HTTP/1 response or the HTTP/2 compatibility API's. Returns
 * whether the request may go on.
 */
export function writeOutcome(
  res: ServerResponse | Http2ServerResponse,
  outcome: RateLimitOutcome,
  handler?: () => void,
): boolean {
  const { headers } = outcome;
  for (const name in headers) res.setHeader(name, headers[name]!);
  if (outcome.allowed) {
    if (outcome.settle !== undefined) settleOnClose(res, outcome.settle);
    return true;
  }
  if (handler !== undefined) {
    handler();
    return false;
  }
  res.statusCode = outcome.status;
  res.setHeader('Content-Length', Buffer.byteLength(outcome.body));
  res.end(outcome.body);
  return false;
}

/**
 * Calls `settle` once the response is over: succeeded when it ended with a status below 400; a
 * connection closed before the response ended counts as failed. Takes Node's HTTP/1 response or
 * the HTTP/2 compatibility API's (`http2.createServer`, Fastify with `http2: true`).
 */
export function settleOnClose(
  res: ServerResponse | Http2ServerResponse,
  settle: (succeeded: boolean) => void,
): void {
  let settled = false;
  const settleNow = () => {
    if (settled) return;
    settled = true;
    settle(delivered(res) && res.statusCode < 400);
  };
  // The client left while the decision was awaited: 'close' has been and gone.
  if (gone(res)) {
    settleNow();
    return;
  }
  res.once('close', settleNow);
  if (res instanceof Http2ServerResponse) return;
  // A response queued behind another on a pipelined connection is never given the socket, and
  // never closes when the client leaves: only its request does, on a socket already destroyed.
  const req = res.req as ServerResponse['req'] | undefined;
  req?.once('close', () => {
    if (req.socket?.destroyed) settleNow();
  });
}

/**
 * Whether the client got the whole response. An HTTP/2 compat response has no `writableFinished`
 * of its own: it reads its stream's, which a reset (the client cancelling) also finishes; a stream
 * that closed with NO_ERROR after `end()` is one the client got whole.
 */
function delivered(res: ServerResponse | Http2ServerResponse): boolean {
  if (res instanceof Http2ServerResponse) {
    return res.writableEnded && res.stream.rstCode === constants.NGHTTP2_NO_ERROR;
  }
  return res.writableFinished;
}

/**
 * Whether the response can no longer reach its client, before it began: HTTP/1's `closed` (the
 * compat response has none: its stream's `destroyed` says it), or, for a pipelined response never
 * given the socket, its connection destroyed.
 */
function gone(res: ServerResponse | Http2ServerResponse): boolean {
  if (res instanceof Http2ServerResponse) return res.stream.destroyed;
  return res.closed || (res.req?.socket?.destroyed ?? false);
}
