/** The header that says a store failure made the decision: `RateLimit-Degraded: policy=open`. */
export const DEFAULT_DEGRADED_HEADER = 'RateLimit-Degraded';

/**
 * Status of a denial made by the `closed` failure policy: the store is down, the client did
 * nothing wrong, so the answer is 503 (Service Unavailable) rather than 429 (Too Many Requests).
 */
export const DEFAULT_FAIL_CLOSED_STATUS = 503;

/** Proxy hops whose `X-Forwarded-For` entry is believed: none. */
export const DEFAULT_TRUST_PROXY = 0;

/** The key of a request whose socket has no remote address any more (it closed). */
export const UNKNOWN_CLIENT_KEY = 'unknown';

/** Media type of a problem document (RFC 9457). */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
