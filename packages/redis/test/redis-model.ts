/**
 * What Redis holds after `apply.lua`, in core's arithmetic: for each bucket key the state the script
 * wrote, the spec of the op that wrote it and when its TTL ends on the injected clock. An op runs
 * core's `applyBucketOp` on copies; the copies are written back only when the op changed the
 * buckets (a report, a credit, a debit, tokens granted, a reset), a full bucket with nothing on
 * lease is deleted, and a key whose TTL ended is gone (the test deletes it from Redis too).
 */
import {
  applyBucketOp,
  type BucketOp,
  type BucketReply,
  freshSharedBucket,
  internal,
  isSharedBucketFull,
  type LimitSpec,
  type SharedBucketState,
} from '@tiered-limiter/core';
import { KEY_TTL_MARGIN_MS } from '@tiered-limiter/redis';

const { bucketOpWrites, msUntilShared, resetSharedBucket } = internal;

export interface Kept {
  readonly state: SharedBucketState;
  readonly spec: LimitSpec;
  /** When the key's TTL ends, in µs of the injected clock. */
  readonly expiresUs: number;
  /** The TTL the script set, in ms. */
  readonly ttlMs: number;
}

export const copyState = (s: SharedBucketState): SharedBucketState => ({
  tokens: s.tokens,
  updatedAtUs: s.updatedAtUs,
  held: s.held.map((g) => ({ ...g })),
});

export class RedisModel {
  readonly kept = new Map<string, Kept>();
  /** Keys written (or deleted) by the last call, for the test to compare with Redis. */
  readonly touched = new Set<string>();
  /** The call's states, as the script caches them: entries on one key see each other's effects. */
  readonly #call = new Map<string, { state: SharedBucketState; spec: LimitSpec; dirty: boolean }>();

  constructor(private readonly keepMs: number) {}

  /** Forgets the keys whose TTL ended by `nowUs`; returns them (to delete from Redis too). */
  expire(nowUs: number): string[] {
    const gone: string[] = [];
    for (const [key, kept] of this.kept) {
      if (nowUs >= kept.expiresUs) {
        this.kept.delete(key);
        gone.push(key);
      }
    }
    return gone;
  }

  /** Copies of the states of `keys` as they are now: kept, or fresh buckets. */
  load(keys: readonly string[], limits: readonly LimitSpec[], nowUs: number): SharedBucketState[] {
    return keys.map((key, i) => {
      const kept = this.#call.get(key) ?? this.kept.get(key);
      return kept === undefined ? freshSharedBucket(limits[i]!, nowUs) : copyState(kept.state);
    });
  }

  apply(keys: readonly string[], op: BucketOp, nowUs: number): BucketReply {
    const states = this.load(keys, op.limits, nowUs);
    const reply = applyBucketOp(states, op.limits, op, nowUs);
    this.#keep(keys, op.limits, states, bucketOpWrites(op, reply));
    return reply;
  }

  reset(keys: readonly string[], limits: readonly LimitSpec[], nowUs: number): void {
    const states = this.load(keys, limits, nowUs);
    states.forEach((s, i) => {
      resetSharedBucket(s, limits[i]!, nowUs);
    });
    this.#keep(keys, limits, states, true);
  }

  #keep(
    keys: readonly string[],
    limits: readonly LimitSpec[],
    states: SharedBucketState[],
    changed: boolean,
  ) {
    keys.forEach((key, i) => {
      const dirty = changed || this.#call.get(key)?.dirty === true;
      this.#call.set(key, { state: states[i]!, spec: limits[i]!, dirty });
    });
  }

  /** The end of a call: each key an entry changed is written (deleted when full), with its TTL. */
  finish(nowUs: number): void {
    this.touched.clear();
    for (const [key, { state, spec, dirty }] of this.#call) {
      if (!dirty) continue;
      this.touched.add(key);
      if (isSharedBucketFull(state, spec)) {
        this.kept.delete(key);
        continue;
      }
      // bucket.lua's save: ms until full, at least until the last release (a reset's fence).
      let fullMs = msUntilShared(state, spec, spec.capacity, nowUs);
      const last = state.held.at(-1);
      if (last !== undefined) fullMs = Math.max(fullMs, Math.ceil((last.releaseUs - nowUs) / 1000));
      const ttlMs = fullMs + KEY_TTL_MARGIN_MS + this.keepMs;
      this.kept.set(key, { state, spec, ttlMs, expiresUs: nowUs + ttlMs * 1000 });
    }
    this.#call.clear();
  }
}
