import type { BucketOp, BucketReply, CallerWait, Clock, LimitSpec } from '@tiered-limiter/core';
import pLimit, { type LimitFunction } from 'p-limit';
import { checkedReply, type GuardedStore } from '../guard/guarded-store.js';
import type { GuardResult } from '../guard/store-guard.js';
import { Answers } from './all-answered.js';
import { BatchSizer } from './batch-size.js';
import type { Lease } from './lease.js';
import { type Ask, grantLifeMs, leaseOp, takeOp, unreported } from './lease-op.js';
import { carrierOf } from './lease-reports.js';
import type { TieredConfig } from './options.js';
import { applyReply } from './reply.js';
import { Settler, withdrawn } from './settler.js';
import { touchSharedClock } from './shared-clock.js';
import type { TieredCounters } from './stats.js';
import { finish, type PendingSync, SyncBatch } from './sync-batch.js';

/**
 * The one owner of a two-tier limiter's conversation with its store, nested one way: guard
 * (timeout, breaker) → queue (ops in flight) → store → the reply applied to the lease. An op is
 * built only when it is sent, so the reports it carries leave the lease's books exactly when
 * they leave the process; a reply is applied when it arrives, even after the request that asked
 * gave up on the timeout, so no granted token is stranded. The store gathers the ops of one tick
 * (a periodic sync, many waiting keys) into few round trips. What a lease owes with nothing asked
 * in return (hand-backs, rewards, penalties) goes through its `settler`, on the same guard and queue.
 */
export class Refiller {
  readonly #store: GuardedStore;
  readonly #config: TieredConfig;
  readonly #clock: Clock;
  readonly #counters: TieredCounters;
  readonly #limits: () => readonly LimitSpec[];
  readonly #queue: LimitFunction;
  /**
   * Store calls queued or sent that may still grant tokens, whether or not their request gave up
   * on the timeout: a call that timed out is still in Redis's queue, and its grant lands when it lands.
   */
  readonly #landing = new Set<Promise<unknown>>();
  /** Syncs made since the last `sendSyncs()`. */
  readonly #syncs = new SyncBatch();
  /** Store calls that ask for tokens, numbered as they are asked for (`asks`). */
  #asks = 0;
  /** How big a lease request is; the sync reads its policy and sizes it for the fleet. */
  readonly batching: BatchSizer;
  /** Hand-backs, rewards and penalties: what a lease owes, sent with nothing asked in return. */
  readonly settler: Settler;
  #onReply: (lease: Lease, leased: number, dry: boolean, stale: Lease | undefined) => void = () => {};

  constructor(
    store: GuardedStore,
    config: TieredConfig,
    clock: Clock,
    counters: TieredCounters,
    limits: () => readonly LimitSpec[],
  ) {
    this.#store = store;
    this.#config = config;
    this.#clock = clock;
    this.#counters = counters;
    this.#limits = limits;
    this.#queue = pLimit(config.maxConcurrentRefills);
    this.batching = new BatchSizer(config.batch, limits, () => config.timing.aheadMs);
    this.settler = new Settler(store, this.#queue, counters, limits, config.timing);
  }

  /**
   * Called with every lease the store just answered for: the tokens it leased, whether the key is
   * dry (turned away, or granted tokens that left the bucket with none), and when `setLimits` has
   * replaced the op's limits since it was made, the carrier of its grant (`stale`), else `undefined`.
   */
  onReply(hook: (lease: Lease, leased: number, dry: boolean, stale: Lease | undefined) => void): void {
    this.#onReply = hook;
  }

  /**
   * Calls that ask for tokens so far (a refill, a first hit's take, a round of syncs), each
   * numbered as it is asked for: it enters the guard and the queue then, so one asked for later
   * reaches the store after it. `Lease.forgotAsk` holds it at a `reward` or `penalty`.
   */
  get asks(): number {
    return this.#asks;
  }

  /**
   * The store call in flight for `lease`, or a new one for at least `min` tokens: a lease sized
   * by demand, or, for a request `waiting` on a key whose demand would not fill a batch of two, a
   * plain take of its one token (a sparse key costs one key-op and keeps no lease; `lease.taken`
   * holds the token for that request). Resolves the reply, already applied to the lease, or the
   * failure the policy must handle; never rejects.
   */
  refill(lease: Lease, min: number, waiting = true): Promise<GuardResult<BucketReply>> {
    if (lease.refill !== undefined) return lease.refill;
    return this.#call(lease, (sentAt) => {
      const want = this.batching.want(lease, min, sentAt);
      if (waiting && want <= 1 && min === 1 && lease.pendingCost <= 1 && lease.tokens === 0)
        return { take: 1 };
      return { want, min: Math.min(min, want) };
    });
  }

  /**
   * A key's first hit here, with no lease: a take of `cost` tokens, counted as a refill and
   * queued like one. A denial is applied to the lease `leaseOnDenial` makes (so that it is
   * remembered), or to none when it makes none. Resolves the reply or the failure the policy
   * must handle; never rejects.
   */
  first(
    key: string,
    cost: number,
    leaseOnDenial: () => Lease | undefined,
  ): Promise<GuardResult<BucketReply>> {
    const ask = ++this.#asks;
    return this.#store.guard.run((wait) =>
      this.#queue(() => {
        if (wait.gaveUp) return withdrawn();
        const sentAt = this.#clock.now();
        const op = takeOp(key, cost, this.#limits(), this.#config.timing);
        this.#counters.refills++;
        return this.#store.store.apply(op, wait).then((answered) => {
          const reply = checkedReply(answered);
          const lease = reply.ok ? undefined : leaseOnDenial();
          if (lease !== undefined) {
            this.#apply(lease, op, reply, ask, sentAt);
          } else {
            this.#counters.latency(this.#clock.now() - sentAt);
            this.#counters.tokensTaken += reply.granted;
          }
          return reply;
        });
      }),
    );
  }

  /**
   * The periodic sync of `lease`: its reports, and a lease of `want` tokens for the next period
   * (or none). Joins nothing and is joined by waiters, like a refill. The op waits with the
   * round's others until `sendSyncs()`.
   */
  sync(lease: Lease, want: number, spans = 1): void {
    this.#syncs.add(lease, want, spans);
  }

  /**
   * Sends the syncs made since the last send in one guarded attempt and one place in the queue;
   * resolves once the store answered them all or the guard gave up; `undefined` when there were
   * none. Each lease's own call resolves with its reply as it lands. One attempt per op (its
   * timer, its place in the queue, their promises) cost Node 25 µs of CPU per synced key, three
   * times what Redis spent on it, and at 100,000 keys the sync was half of a process's CPU.
   */
  sendSyncs(): Promise<unknown> | undefined {
    const syncs = this.#syncs.take();
    if (syncs.length === 0) return undefined;
    const asked = ++this.#asks;
    const attempt = this.#store.guard.run(() => this.#queued(() => this.#sendEach(syncs, asked)));
    // A refusal, a timeout or a failed call: what had not answered learns it from the guard.
    return attempt.then((result) => {
      if (!result.ok) for (const sync of syncs) finish(sync, result);
    });
  }

  /**
   * Sends each of `syncs` and applies its reply, and ends its lease's call, as it lands: one
   * reaction per op. A promise from `#exchange`, another to end the call and an `allSettled`
   * entry each were about 1 KB of an op's garbage.
   */
  #sendEach(syncs: readonly PendingSync[], asked: number): Promise<void> {
    const sentAt = this.#clock.now();
    const answers = new Answers(syncs.length);
    for (let i = 0; i < syncs.length; i++) {
      const sync = syncs[i]!;
      const { lease, want, spans } = sync;
      const ask = want > 0 ? { want, min: 1, spans } : undefined;
      const lifeMs = grantLifeMs(ask, this.#config.timing);
      const op = this.#sending(lease, ask, true);
      this.#store.store.apply(op).then(
        (reply) => {
          try {
            this.#apply(lease, op, checkedReply(reply), asked, sentAt, lifeMs);
          } catch (error) {
            answers.failed(i, error);
            return;
          }
          finish(sync, { ok: true, value: reply });
          answers.answered();
        },
        (error: unknown) => {
          this.#counters.tokensUnreported += unreported(op);
          answers.failed(i, error);
        },
      );
    }
    return answers.done;
  }

  /**
   * The store calls queued or sent that have not answered yet, timed out or not: once they have,
   * no grant can land any more (`close()` waits for them before it is done).
   */
  landing(): Promise<unknown>[] {
    return [...this.#landing];
  }

  #call(lease: Lease, ask: (sentAt: number) => Ask): Promise<GuardResult<BucketReply>> {
    const asked = ++this.#asks;
    const call = this.#store.guard.run((wait) =>
      this.#queued(() => {
        if (wait.gaveUp) return withdrawn();
        const sentAt = this.#clock.now();
        return this.#exchange(lease, ask(sentAt), false, asked, sentAt, wait);
      }),
    );
    lease.refill = call;
    void call.then(() => {
      if (lease.refill === call) lease.refill = undefined;
    });
    return call;
  }

  /**
   * Sends `lease`'s op (what it owes, and `ask`), call number `asked` sent at `sentAt`, and
   * applies the reply to the lease; what a failed op carried is counted unreported, never resent.
   */
  #exchange(
    lease: Lease,
    ask: Ask,
    background: boolean,
    asked: number,
    sentAt: number,
    wait?: CallerWait,
  ): Promise<BucketReply> {
    // The grant's life is fixed with its op: a reply that lands after a retime keeps the hold it was sent with.
    const lifeMs = grantLifeMs(ask, this.#config.timing);
    const op = this.#sending(lease, ask, background);
    return this.#store.store.apply(op, wait).then(
      (reply) => {
        this.#apply(lease, op, checkedReply(reply), asked, sentAt, lifeMs);
        return reply;
      },
      (error: unknown) => {
        this.#counters.tokensUnreported += unreported(op);
        throw error;
      },
    );
  }

  /** `lease`'s op (what it owes, and `ask`) as it is sent, counted. */
  #sending(lease: Lease, ask: Ask, background: boolean): BucketOp {
    const op = this.#op(lease, ask, background) ?? { key: lease.key, limits: this.#limits() };
    if (op.reserve !== undefined || op.take !== undefined) this.#counters.refills++;
    else this.#counters.refunds++;
    return op;
  }

  /** `fn` in the refill queue, tracked from there (a call still queued when close() begins is sent later). */
  #queued<T>(fn: () => Promise<T>): Promise<T> {
    const queued = this.#queue(fn);
    this.#landing.add(queued);
    return queued.finally(() => this.#landing.delete(queued));
  }

  #op(
    lease: Lease,
    ask: Ask,
    background: boolean,
    credit = 0,
    debit = 0,
    limits = this.#limits(),
  ): BucketOp | undefined {
    return leaseOp(lease, ask, background, limits, this.#config.timing, credit, debit);
  }

  #apply(lease: Lease, op: BucketOp, reply: BucketReply, ask: number, sentAt: number, lifeMs?: number): void {
    // A reply is a moment the main thread runs anyway: bring the shared clock up to date too.
    touchSharedClock();
    const stale = op.limits === this.#limits() ? undefined : carrierOf(lease, op.limits);
    const { leased, dry } = applyReply(
      lease,
      op,
      reply,
      ask,
      sentAt,
      this.#clock.now(),
      this.#counters,
      this.#config,
      lifeMs,
      stale,
    );
    this.#onReply(lease, leased, dry, stale);
  }
}
