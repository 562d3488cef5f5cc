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
  /** Set instead of the op's fields: the key's buckets become full, their leases fenced off (`reset`). */
  readonly reset?: true | undefined;
}

/** Which optional fields an entry carries, in this order after its flags (`apply.lua` reads the same bits). */
const FLAG = { take: 1, reserve: 2, credit: 4, debit: 8, ahead: 16, reports: 32, reset: 64 } as const;

/**
 * The arguments of one `apply.lua` call for `batch`: `numkeys, KEYS…`, then every number in the
 * layout the script's header gives as one JSON array (E, S, the ms a key is kept once its bucket
 * is full, S limit sets of N capacity/rate pairs shared by the entries, then per op its set and
 * flags and only the fields the flags name; or set 0, instance, ttlMs for a heartbeat), then the
 * heartbeats' instances. One argument, not one per number: ioredis spent about 0.35 µs writing
 * each numeric argument, and Redis more making each a Lua string than `cjson.decode` takes to
 * read them all (a call of 30 ops carries 170).
 */
export function encodeOps(batch: readonly EncodableOp[], keepAfterFullMs: number): (string | number)[] {
  let numKeys = 0;
  for (const { keys } of batch) numKeys += keys.length;
  const args: (string | number)[] = [numKeys];
  for (const { keys } of batch) for (const key of keys) args.push(key);
  // The ops of one limiter share its limits array: a set is sent once per call.
  const sets = new Map<BucketOp['limits'], number>();
  const entries: number[] = [];
  const instances: string[] = [];
  for (const { op, heartbeat, reset } of batch) {
    if (heartbeat !== undefined) {
      instances.push(heartbeat.instance);
      entries.push(0, instances.length, heartbeat.ttlMs);
      continue;
    }
    let set = sets.get(op.limits);
    if (set === undefined) {
      set = sets.size + 1;
      sets.set(op.limits, set);
    }
    if (reset) {
      entries.push(set, FLAG.reset);
      continue;
    }
    const { take, reserve, credit, debit, aheadMs, reports } = op;
    const flags =
      (take ? FLAG.take : 0) |
      (reserve && reserve.want > 0 ? FLAG.reserve : 0) |
      (credit ? FLAG.credit : 0) |
      (debit ? FLAG.debit : 0) |
      (aheadMs ? FLAG.ahead : 0) |
      (reports && reports.length > 0 ? FLAG.reports : 0);
    entries.push(set, flags);
    if (flags & FLAG.take) entries.push(take as number);
    if (flags & FLAG.reserve) entries.push(reserve!.want, reserve!.min, reserve!.holdMs);
    if (flags & FLAG.credit) entries.push(credit as number);
    if (flags & FLAG.debit) entries.push(debit as number);
    if (flags & FLAG.ahead) entries.push(aheadMs as number);
    if (flags & FLAG.reports) {
      entries.push(reports!.length);
      for (const r of reports!) entries.push(r.generation, r.spent, r.returned);
    }
  }
  const numbers: number[] = [batch.length, sets.size, keepAfterFullMs];
  for (const limits of sets.keys()) {
    numbers.push(limits.length);
    for (const spec of limits) numbers.push(spec.capacity, spec.refillPerSecond);
  }
  for (const entry of entries) numbers.push(entry);
  // Every number is finite (core validates limits and costs), so each prints as valid JSON.
  args.push(`[${numbers.join(',')}]`);
  for (const instance of instances) args.push(instance);
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
