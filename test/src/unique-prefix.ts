import { randomBytes } from 'node:crypto';

let counter = 0;

/**
 * A key prefix no other test, process or run uses (pid, counter, random), valid as a
 * `RedisStore` prefix: every test keeps to its own keys, even on a shared `REDIS_URL` server.
 * `label` must itself be a valid prefix (`A-Z a-z 0-9 _ . : / -`).
 */
export function uniquePrefix(label = 't'): string {
  counter += 1;
  return `${label}-${process.pid.toString(36)}-${counter.toString(36)}-${randomBytes(3).toString('hex')}`;
}
