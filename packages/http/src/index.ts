export type {
  RateLimitAllowed,
  RateLimitCheck,
  RateLimitDenied,
  RateLimitOptions,
  RateLimitOutcome,
} from './check.js';
export { createRateLimitCheck } from './check.js';
export { clientIp } from './client-ip.js';
export {
  DEFAULT_DEGRADED_HEADER,
  DEFAULT_FAIL_CLOSED_STATUS,
  DEFAULT_TRUST_PROXY,
  PROBLEM_CONTENT_TYPE,
  UNKNOWN_CLIENT_KEY,
} from './defaults.js';
export type { RateLimitMiddleware } from './express.js';
export { expressRateLimit } from './express.js';
export type { FastifyReplyLike, FastifyRequestLike, RateLimitHook } from './fastify.js';
export { fastifyRateLimit } from './fastify.js';
export type { PolicyItem, RateLimitHeaderOptions, RateLimitHeaders, RateLimitPolicy } from './headers.js';
export { rateLimitHeaders, rateLimitPolicy } from './headers.js';
export { createRateLimit, writeOutcome } from './node-http.js';
export type { Denial, ProblemDocument, ProblemOption } from './problem.js';
export { defaultProblem } from './problem.js';
export type { HttpLimiter, RouteLimit, RouteLimits } from './routes.js';
