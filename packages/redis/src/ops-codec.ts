import type { BucketOp, BucketReply } from '@tiered-limiter/core';
import { StoreError } from '@tiered-limiter/core';

/** Integers `apply.lua` replies per op. */
export const REPLY_WIDTH = 7;

/** An op on its way: what it asks and its Redis keys. */
export interface EncodableOp {
  readonly op: BucketOp;
  readonly keys: readonly string[];
  /** Set instead of a bucket op: register `instance` in the fleet set `keys[0]` for `ttlMs`. */
  readonly heartbeat?: { readonly instance: string; readonly ttlMs: number } | undefined;
}

/**
 * The arguments of one `apply.lua` call for `batch`: `numkeys, KEYS…, ARGV…` in the layout the
 * script's header gives (E, then per op: N, capacity/rate pairs, take, want, min, holdMs, credit,
 * debit, aheadMs, R, report triples; or N = 0, instance, ttlMs for a heartbeat).
 */
export function encodeOps(batch: readonly EncodableOp[]): (string | number)[] {
  let numKeys = 0;
  for (const { keys } of batch) numKeys += keys.length;
  const args: (string | number)[] = [numKeys];
  for (const { keys } of batch) for (const key of keys) args.push(key);
  args.push(batch.length);
  for (const { op, heartbeat } of batch) {
    if (heartbeat !== undefined) {
      // N = 0 marks a heartbeat entry: the instance and how long it counts as alive.
      args.push(0, heartbeat.instance, heartbeat.ttlMs);
      continue;
    }
    args.push(op.limits.length);
    for (const spec of op.limits) args.push(spec.capacity, spec.refillPerSecond);
    const reserve = op.reserve;
    args.push(
      op.take ?? 0,
      reserve?.want ?? 0,
      reserve?.min ?? 0,
      reserve?.holdMs ?? 0,
      op.credit ?? 0,
      op.debit ?? 0,
      op.aheadMs ?? 0,
    );
    const reports = op.reports ?? [];
    args.push(reports.length);
    for (const r of reports) args.push(r.generation, r.spent, r.returned);
  }
  return args;
}

/**
 * The replies of one `apply.lua` call, one per op of `batch`. ioredis gives numbers, or strings
 * with its `stringNumbers` option; anything else means a key was not ours (a wrong type) or the
 * script is not ours.
 */
export function readReplies(reply: unknown, batch: readonly EncodableOp[]): BucketReply[] {
  if (!Array.isArray(reply) || reply.length !== batch.length * REPLY_WIDTH) throw unexpected(reply);
  const values = reply.map((value) => (typeof value === 'string' ? Number(value) : value));
  if (!values.every(Number.isInteger)) throw unexpected(reply);
  return batch.map((_, i) => {
    const at = i * REPLY_WIDTH;
    return {
      ok: values[at] === 1,
      granted: values[at + 1] as number,
      generation: values[at + 2] as number,
      remaining: values[at + 3] as number,
      retryAfterMs: values[at + 4] as number,
      resetMs: values[at + 5] as number,
      limitIndex: values[at + 6] as number,
    };
  });
}

function unexpected(reply: unknown): StoreError {
  let text: string;
  try {
    text = JSON.stringify(reply) ?? String(reply);
  } catch {
    text = String(reply);
  }
  return new StoreError(
    `redis apply gave an unexpected reply: ${text.length > 120 ? `${text.slice(0, 120)}…` : text}`,
  );
}
