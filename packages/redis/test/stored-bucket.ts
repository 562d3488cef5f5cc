/**
 * A bucket key's value as `bucket.lua` stores it, for tests that seed or inspect Redis directly:
 * the byte 1, then little-endian doubles (tokens, ts, then releaseUs and count per generation).
 * The text format before it, `"<tokens> <ts>[ <releaseUs>:<count>]…"`, is still read by the script.
 */
import type { SharedBucketState } from '@tiered-limiter/core';
import type { Redis } from 'ioredis';

const FORMAT = 1;

export function encodeBucket(state: SharedBucketState): Buffer {
  const value = Buffer.alloc(17 + 16 * state.held.length);
  value.writeUInt8(FORMAT, 0);
  value.writeDoubleLE(state.tokens, 1);
  value.writeDoubleLE(state.updatedAtUs, 9);
  state.held.forEach((g, i) => {
    value.writeDoubleLE(g.releaseUs, 17 + 16 * i);
    value.writeDoubleLE(g.count, 25 + 16 * i);
  });
  return value;
}

/** The format of the versions before the binary one. */
export function encodeTextBucket(state: SharedBucketState): string {
  const held = state.held.map((g) => ` ${g.releaseUs}:${g.count}`).join('');
  return `${state.tokens} ${state.updatedAtUs}${held}`;
}

export function decodeBucket(value: Buffer): SharedBucketState {
  if (value[0] !== FORMAT || value.length < 17 || (value.length - 1) % 16 !== 0) {
    throw new Error(`not a stored bucket: ${value.toString('hex')}`);
  }
  const held: { releaseUs: number; count: number }[] = [];
  for (let at = 17; at < value.length; at += 16) {
    held.push({ releaseUs: value.readDoubleLE(at), count: value.readDoubleLE(at + 8) });
  }
  return { tokens: value.readDoubleLE(1), updatedAtUs: value.readDoubleLE(9), held };
}

/**
 * The bucket stored at `key`, or null when there is none. `asking`: ASKING first, on the same
 * connection, for a Cluster node importing `key`'s slot, which serves the slot's keys only then.
 */
export async function readBucket(
  redis: Redis,
  key: string,
  asking = false,
): Promise<SharedBucketState | null> {
  const value = asking ? await askingGet(redis, key) : await redis.getBuffer(key);
  return value === null ? null : decodeBucket(value);
}

async function askingGet(redis: Redis, key: string): Promise<Buffer | null> {
  const [, [error, value] = []] = (await redis.pipeline().asking().getBuffer(key).exec()) ?? [];
  if (error) throw error;
  return value as Buffer | null;
}
