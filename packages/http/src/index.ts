export type { RateLimitCheck } from './check.js';
export { createRateLimitCheck } from './check.js';
export { clientIp } from './client-ip.js';
export {
  DEFAULT_DEGRADED_HEADER,
  DEFAULT_FAIL_CLOSED_STATUS,
  DEFAULT_IPV6_SUBNET,
  DEFAULT_MAX_LIMITERS,
  DEFAULT_REQUEST_PROPERTY,
  DEFAULT_STANDARD_HEADERS,
  DEFAULT_STATUS_CODE,
  DEFAULT_TRUST_PROXY,
  PROBLEM_CONTENT_TYPE,
  UNKNOWN_CLIENT_KEY,
} from './defaults.js';
export type { ExpressRateLimitOptions, RateLimitMiddleware } from './express.js';
export { expressRateLimit } from './express.js';
export type {
  FastifyRateLimitOptions,
  FastifyReplyLike,
  FastifyRequestLike,
  RateLimitHook,
} from './fastify.js';
export { fastifyRateLimit } from './fastify.js';
export type { FetchRateLimit, FetchRateLimitOptions, FetchRateLimitResult } from './fetch.js';
export { fetchRateLimit } from './fetch.js';
export type {
  PolicyItem,
  RateLimitHeaderOptions,
  RateLimitHeaders,
  RateLimitPolicy,
  StandardHeaders,
} from './headers.js';
export { rateLimitHeaders, rateLimitPolicy } from './headers.js';
export { ipKey } from './ip.js';
export type { HttpLimiter } from './limiter.js';
export type { NodeRateLimitOptions } from './node-http.js';
export { createRateLimit } from './node-http.js';
export type {
  LimitOption,
  RateLimitAllowed,
  RateLimitDenied,
  RateLimitInfo,
  RateLimitOptions,
  RateLimitOutcome,
} from './options.js';
export type { Denial, ProblemDocument, ProblemOption } from './problem.js';
export { defaultProblem } from './problem.js';
export type { RawRequest } from './raw-request.js';
export { writeOutcome } from './respond.js';
export type { RouteLimit, RouteLimits } from './routes.js';
