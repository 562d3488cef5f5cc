import type { ServerResponse } from 'node:http';
import type { RateLimitOutcome } from './options.js';

/**
 * Writes an outcome of `createRateLimitCheck` to a Node response: the headers; on a denial the
 * status and body, ending the response (or `handler`, when given, which then answers); on an
 * admission, watches the response so that `skipFailedRequests`/`skipSuccessfulRequests` can give
 * the tokens back. Returns whether the request may go on.
 */
export function writeOutcome(res: ServerResponse, outcome: RateLimitOutcome, handler?: () => void): boolean {
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
 * connection closed before the response ended counts as failed.
 */
export function settleOnClose(res: ServerResponse, settle: (succeeded: boolean) => void): void {
  let settled = false;
  const settleNow = () => {
    if (settled) return;
    settled = true;
    settle(res.writableFinished && res.statusCode < 400);
  };
  // The client left while the decision was awaited: 'close' has been and gone.
  if (res.closed) {
    settleNow();
    return;
  }
  res.once('close', settleNow);
  // A response queued behind another on a pipelined connection is never given the socket, and
  // never closes when the client leaves: only its request does, on a socket already destroyed.
  const req = res.req as ServerResponse['req'] | undefined;
  req?.once('close', () => {
    if (req.socket?.destroyed) settleNow();
  });
}
