/** The header that says a store failure made the decision: `RateLimit-Degraded: policy=open`. */
export const DEFAULT_DEGRADED_HEADER = 'RateLimit-Degraded';

/**
 * Status of a denial made by the `closed` failure policy: the store is down, the client did
 * nothing wrong, so the answer is 503 (Service Unavailable) rather than 429 (Too Many Requests).
 */
export const DEFAULT_FAIL_CLOSED_STATUS = 503;

/** Status of a denial by a limit: 429 Too Many Requests. */
export const DEFAULT_STATUS_CODE = 429;

/** Proxy hops whose `X-Forwarded-For` entry is believed: none. */
export const DEFAULT_TRUST_PROXY = 0;

/**
 * Bits of an IPv6 address the default key keeps: 56, express-rate-limit 8's default. Providers
 * hand a customer a /48 to a /64; keying per address would let one client hold 2^64 keys.
 */
export const DEFAULT_IPV6_SUBNET = 56;

/** The key of a request whose socket has no remote address any more (it closed). */
export const UNKNOWN_CLIENT_KEY = 'unknown';

/** Media type of a problem document (RFC 9457). */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** The request property the decision is put on: `req.rateLimit`. */
export const DEFAULT_REQUEST_PROPERTY = 'rateLimit';

/** The revision of draft-ietf-httpapi-ratelimit-headers whose fields are sent. */
export const DEFAULT_STANDARD_HEADERS = 'draft-11';

/**
 * Limiters a `limit` function may call for (one per distinct set of limits) before the least
 * recently used is closed: plans are a handful; a function that makes a limit per user is a leak.
 */
export const DEFAULT_MAX_LIMITERS = 100;
