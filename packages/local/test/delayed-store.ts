/**
 * A `GlobalStore` over `MemoryStore` whose calls travel: each op reaches the store a random
 * number of fake-timer ms after it is sent, runs there at that moment (as Redis runs a script when
 * it receives it, not when the caller sent it), and its answer travels back a random number of ms
 * more. Two calls sent in order may run and answer in either order. A shadow of the books, fed
 * the same ops at the same moments, tells what a reset found (the bound's addition for it).
 */
import {
  applyBucketOp,
  type BucketOp,
  type BucketReply,
  type Clock,
  freshSharedBucket,
  type GlobalStore,
  internal,
  isSharedBucketFull,
  type LimitSpec,
  type SharedBucketState,
} from '@tiered-limiter/core';
import type { MemoryStore } from '@tiered-limiter/local';

const { bucketOpWrites, copySharedBucket, resetSharedBucket, settleSharedBucket } = internal;

/** A bucket of the shadow, and the limit of the op or reset that last wrote it. */
interface ShadowEntry {
  readonly state: SharedBucketState;
  spec: LimitSpec;
}

/** A reward that landed: `tokens` asked, at the store's moment. */
export interface Credit {
  readonly key: string;
  readonly atMs: number;
  readonly tokens: number;
}

/**
 * A reset at the store's moment `atMs`: it found `tokens` in the bucket (a fresh one is full to
 * the capacity of whichever limits its next op carries), and forgot `held` tokens on lease,
 * spendable until `untilMs` at the latest.
 */
export interface ResetMark {
  readonly key: string;
  /** The name of the limit whose bucket it was. */
  readonly limit: string;
  readonly atMs: number;
  readonly tokens: number;
  readonly held: number;
  readonly untilMs: number;
}

/** A take the store passed at `atMs`, answered at `answeredAtMs` (its caller's moment). */
export interface Take {
  readonly key: string;
  readonly atMs: number;
  answeredAtMs: number;
  readonly cost: number;
}

/** How a call travels: the ms to reach the store and the ms its answer takes back. */
export type Travel = () => readonly [inMs: number, outMs: number];

/**
 * `MemoryStore` behind calls that travel (`Travel`), recording what the bound's additions need:
 * the credits that landed, what each reset found, the takes that passed, and the most refill any
 * take or lease asked to borrow.
 */
export class DelayedStore implements GlobalStore {
  readonly credits: Credit[] = [];
  readonly resets: ResetMark[] = [];
  /** Takes that passed, at the store's moment: a request admitted by the store is admitted then. */
  readonly takes: Take[] = [];
  /** Replies where the shadow of the books and the store disagreed (none, or the shadow is wrong). */
  readonly mismatches: unknown[] = [];
  /** The most refill any take or lease asked to borrow: the bound's `T`. */
  maxAheadMs = 0;
  /** Tokens the store gave out, net: granted to takes and leases, less those handed back. */
  given = 0;
  readonly #inner: MemoryStore;
  readonly #clock: Clock;
  readonly #travel: Travel;
  readonly #shadow = new Map<string, ShadowEntry>();
  /**
   * Per key, the store's leased generations as its replies told them: tokens not yet reported and
   * until when the store holds them. A reset forgets them, and the shadow can miss them: once a
   * key's limit changed, MemoryStore may lease from a bucket the shadow does not have.
   */
  readonly #leased = new Map<string, Map<number, { count: number; untilMs: number }>>();
  readonly #specs = new Set<string>();
  /** Per key and limit name, the capacity the last op or reset carried: a larger one is a raise. */
  readonly #capacities = new Map<string, number>();

  constructor(inner: MemoryStore, clock: Clock, travel: Travel) {
    this.#inner = inner;
    this.#clock = clock;
    this.#travel = travel;
  }

  apply(op: BucketOp): Promise<BucketReply> {
    return this.#trip<BucketReply | { reply: BucketReply; take: Take }>(() => {
      if (op.take !== undefined || op.reserve !== undefined) {
        this.maxAheadMs = Math.max(this.maxAheadMs, op.aheadMs ?? 0);
      }
      if ((op.credit ?? 0) > 0)
        this.credits.push({ key: op.key, atMs: this.#clock.now(), tokens: op.credit! });
      this.#raises(op.key, op.limits);
      const shadowReply = this.#shadowApply(op);
      return this.#inner.apply(op).then((reply) => {
        // The shadow is only trusted for what a reset found if it is the store's twin (a failed
        // expect here would only reject the call, which the limiter takes for an outage). Once a
        // key's limit changed they may part: MemoryStore forgets a bucket full by its last op's
        // spec (as Redis's TTL does), where the shadow keeps it for the next op's. The shadow then
        // holds no more than the store, so a reset's addition read from it is never short.
        this.#specs.add(JSON.stringify(op.limits));
        this.given += reply.granted;
        if (op.reports !== undefined) for (const r of op.reports) this.given -= r.returned;
        this.#leases(op, reply);
        if (this.#specs.size === 1 && JSON.stringify(reply) !== JSON.stringify(shadowReply))
          this.mismatches.push({ op, reply, shadowReply });
        if (op.take === undefined || !reply.ok) return reply;
        const take = { key: op.key, atMs: this.#clock.now(), answeredAtMs: Number.NaN, cost: reply.granted };
        this.takes.push(take);
        return { reply, take };
      });
    }).then((answer) => {
      if (!('take' in answer)) return answer;
      answer.take.answeredAtMs = this.#clock.now();
      return answer.reply;
    });
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#trip(() => {
      const nowUs = this.#nowUs();
      const leased = this.#forget(key, nowUs / 1000);
      this.#raises(key, limits);
      this.#specs.add(JSON.stringify(limits));
      for (const spec of limits) {
        const state = this.#kept(idOf(key, spec), nowUs);
        if (state === undefined) continue;
        settleSharedBucket(state, spec, nowUs);
        let held = 0;
        for (const g of state.held) held += g.count;
        const last = state.held.at(-1);
        const untilMs = last === undefined ? nowUs / 1000 : last.releaseUs / 1000;
        this.resets.push({
          key,
          limit: spec.name,
          atMs: nowUs / 1000,
          tokens: state.tokens,
          // What the store's replies say it held, if the shadow missed it.
          held: Math.max(held, leased.held),
          untilMs: Math.max(untilMs, leased.untilMs),
        });
        resetSharedBucket(state, spec, nowUs);
        // As MemoryStore does: a full bucket is forgotten, and its next op's limits make it afresh.
        if (isSharedBucketFull(state, spec)) this.#shadow.delete(idOf(key, spec));
        else this.#shadow.set(idOf(key, spec), { state, spec });
      }
      return this.#inner.reset(key, limits);
    });
  }

  heartbeat(instance: string, ttlMs: number): Promise<number> {
    return this.#trip(() => this.#inner.heartbeat(instance, ttlMs));
  }

  leave(instance: string): Promise<void> {
    return this.#trip(() => this.#inner.leave(instance));
  }

  /**
   * Marks, at the store's moment, each limit of `key` whose capacity this op carries above the
   * last op's (`setLimits` raised it). The store may have forgotten the bucket full by the smaller
   * capacity, and makes it afresh full by this one: up to the difference more, once (docs/ACCURACY.md,
   * "setLimits raising a capacity"). Recorded as a reset that found the smaller capacity and forgot
   * no lease, so a window holding it allows the difference; a raise the store did not forget the
   * bucket across gives nothing, and the mark only makes its windows looser.
   */
  #raises(key: string, limits: readonly LimitSpec[]): void {
    const atMs = this.#nowUs() / 1000;
    for (const spec of limits) {
      const id = idOf(key, spec);
      const before = this.#capacities.get(id);
      if (before !== undefined && spec.capacity > before) {
        this.resets.push({ key, limit: spec.name, atMs, tokens: before, held: 0, untilMs: atMs });
      }
      this.#capacities.set(id, spec.capacity);
    }
  }

  /** Notes what `op`'s reply leased and what its reports settled, at the store's moment. */
  #leases(op: BucketOp, reply: BucketReply): void {
    let gens = this.#leased.get(op.key);
    if (op.reports !== undefined && gens !== undefined) {
      for (const r of op.reports) {
        const g = gens.get(r.generation);
        if (g !== undefined) g.count -= r.spent + r.returned;
      }
    }
    if (op.reserve === undefined || reply.granted === 0) return;
    if (gens === undefined) {
      gens = new Map();
      this.#leased.set(op.key, gens);
    }
    const g = gens.get(reply.generation) ?? { count: 0, untilMs: 0 };
    g.count += reply.granted;
    g.untilMs = Math.max(g.untilMs, this.#clock.now() + op.reserve.holdMs);
    gens.set(reply.generation, g);
  }

  /** Forgets `key`'s leased generations (a reset): the tokens still on lease at `nowMs`, and until when. */
  #forget(key: string, nowMs: number): { held: number; untilMs: number } {
    const gens = this.#leased.get(key);
    this.#leased.delete(key);
    let held = 0;
    let untilMs = nowMs;
    if (gens !== undefined) {
      for (const g of gens.values()) {
        if (g.count <= 0 || g.untilMs <= nowMs) continue;
        held += g.count;
        if (g.untilMs > untilMs) untilMs = g.untilMs;
      }
    }
    return { held, untilMs };
  }

  #nowUs(): number {
    return Math.round(this.#clock.now() * 1000);
  }

  #shadowApply(op: BucketOp): BucketReply {
    const nowUs = this.#nowUs();
    // Copies, as the store applies an op to: the shadow changes only if the op writes.
    const states = op.limits.map((spec) => {
      const kept = this.#kept(idOf(op.key, spec), nowUs);
      return kept === undefined ? freshSharedBucket(spec, nowUs) : copySharedBucket(kept);
    });
    const reply = applyBucketOp(states, op.limits, op, nowUs);
    // Kept when the store keeps it: a refusal kept here settled the buckets by the limits it
    // carried, and after `setLimits` the shadow found the old rate's refill where the store
    // refilled the whole gap at the new one, so a reset's addition read from it came out short.
    if (!bucketOpWrites(op, reply)) return reply;
    op.limits.forEach((spec, i) => {
      if (isSharedBucketFull(states[i]!, spec)) this.#shadow.delete(idOf(op.key, spec));
      else this.#shadow.set(idOf(op.key, spec), { state: states[i]!, spec });
    });
    return reply;
  }

  /**
   * The shadow's bucket `id` at `nowUs`, or `undefined` where the store has none: as MemoryStore
   * reads it (and as Redis's TTL, set by the op that last wrote the key, expires it), a bucket full
   * by the limit that last wrote it is gone, whether or not a sweep has dropped it. Kept, the
   * shadow refused takes the store, making the bucket afresh under a raised capacity, granted; the
   * key's other limits then kept in the shadow the tokens those takes spent at the store, and a
   * reset's addition read from them came out short (the long fuzz, 2026-12-07: 32 admitted against
   * 24 allowed, where the store's bucket held 0.4 tokens and the shadow's 16.4).
   */
  #kept(id: string, nowUs: number): SharedBucketState | undefined {
    const entry = this.#shadow.get(id);
    if (entry === undefined) return undefined;
    const last = entry.state.held.at(-1);
    if (last !== undefined && last.releaseUs > nowUs) return entry.state;
    const copy = copySharedBucket(entry.state);
    settleSharedBucket(copy, entry.spec, nowUs);
    if (!isSharedBucketFull(copy, entry.spec)) return entry.state;
    this.#shadow.delete(id);
    return undefined;
  }

  /** Runs `run` at the store after the way in, and answers after the way back (0 ms: at once). */
  #trip<T>(run: () => Promise<T>): Promise<T> {
    const [inMs, outMs] = this.#travel();
    const arrive = inMs === 0 ? run() : after(inMs).then(run);
    return outMs === 0 ? arrive : arrive.then((value) => after(outMs).then(() => value));
  }
}

function after(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function idOf(key: string, spec: LimitSpec): string {
  return `${spec.name}\u0000${key}`;
}
