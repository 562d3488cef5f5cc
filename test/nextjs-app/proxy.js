import { NextResponse } from 'next/server';
import { rateLimit } from './lib/limiter.js';

// Next.js 16's proxy (middleware), on the Node.js runtime: the limit applies before the route runs,
// and its headers ride on `NextResponse.next()` to the route's response.
export async function proxy(request) {
  const limited = await (await rateLimit('guarded', 2))(request);
  if (!limited.allowed) return limited.response;
  return limited.finish(NextResponse.next());
}

export const config = { matcher: '/api/guarded' };
