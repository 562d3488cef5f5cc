import { rateLimit } from '../../../lib/limiter.js';

export async function GET(request) {
  const limited = await (await rateLimit('items', 3, { skipFailedRequests: true }))(request);
  if (!limited.allowed) return limited.response;
  const failing = new URL(request.url).searchParams.has('fail');
  const body = { key: limited.decision.key, tier: limited.decision.tier };
  return limited.finish(Response.json(body, { status: failing ? 500 : 200 }));
}
