import {
  type BucketOp,
  type BucketReply,
  type CallerWait,
  type Clock,
  type LimitSpec,
  StoreTimeoutError,
  StoreWithdrawnError,
} from '@tiered-limiter/core';
import pLimit, { type LimitFunction } from 'p-limit';
import type { GuardedStore } from '../guard/guarded-store.js';
import { type GuardResult, NOTHING_SENT } from '../guard/store-guard.js';
import { allAnswered } from './all-answered.js';
import { BatchSizer } from './batch-size.js';
import type { Lease } from './lease.js';
import { type Ask, grantLifeMs, leaseOp, type SettleOptions, takeOp, unreported } from './lease-op.js';
import type { TieredConfig } from './options.js';
import { applyReply, returned } from './reply.js';
import { touchSharedClock } from './shared-clock.js';
import type { TieredCounters } from './stats.js';
import { finish, SyncBatch } from './sync-batch.js';

/**
 * The one owner of a two-tier limiter's conversation with its store, nested one way: guard
 * (timeout, breaker) → queue (ops in flight) → store → the reply applied to the lease. An op is
 * built only when it is sent, so the reports it carries leave the lease's books exactly when
 * they leave the process; a reply is applied when it arrives, even after the request that asked
 * gave up on the timeout, so no granted token is stranded. The store gathers the ops of one tick
 * (a periodic sync, many waiting keys) into few round trips.
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
  /** How big a lease request is; the sync reads its policy and sizes it for the fleet. */
  readonly batching: BatchSizer;
  #onReply: (lease: Lease, leased: number, dry: boolean, stale: readonly LimitSpec[] | undefined) => void =
    () => {};

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
  }

  /**
   * Called with every lease the store just answered for: the tokens it leased, whether the key is
   * dry (turned away, or granted tokens that left the bucket with none), and the op's limits when
   * `setLimits` has replaced them since it was made (`stale`), else `undefined`.
   */
  onReply(
    hook: (lease: Lease, leased: number, dry: boolean, stale: readonly LimitSpec[] | undefined) => void,
  ): void {
    this.#onReply = hook;
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
    return this.#store.guard.run((wait) =>
      this.#queue(() => {
        if (wait.gaveUp) return withdrawn();
        const sentAt = this.#clock.now();
        const op = takeOp(key, cost, this.#limits(), this.#config.timing);
        this.#counters.refills++;
        return this.#store.store.apply(op, wait).then((reply) => {
          const lease = reply.ok ? undefined : leaseOnDenial();
          if (lease !== undefined) {
            this.#apply(lease, op, reply, sentAt);
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
    const attempt = this.#store.guard.run(() =>
      this.#queued(() => {
        const sentAt = this.#clock.now();
        const sent: Promise<void>[] = [];
        for (const sync of syncs) {
          const { lease, want, spans } = sync;
          const ask = want > 0 ? { want, min: 1, spans } : undefined;
          sent.push(
            this.#exchange(lease, ask, true, sentAt).then((reply) =>
              finish(sync, { ok: true, value: reply }),
            ),
          );
        }
        return allAnswered(sent);
      }),
    );
    // A refusal, a timeout or a failed call: what had not answered learns it from the guard.
    return attempt.then((result) => {
      if (!result.ok) for (const sync of syncs) finish(sync, result);
    });
  }

  /**
   * Sends what `lease` owes the store (spends and hand-backs) with nothing asked in return, and a
   * `credit` or `debit` (`reward`, `penalty`: after the spends, so that a reward lands in the room
   * they free). Resolves whether the store took it.
   */
  settle(lease: Lease, { credit, debit, limits }: SettleOptions = {}): Promise<boolean> {
    const send = (wait: CallerWait) =>
      this.#queue(
        (): Promise<unknown> =>
          this.#sendOwed(lease, credit, debit, limits, wait) ?? Promise.resolve(NOTHING_SENT),
      );
    return this.#store.guard.run(send).then((result) => result.ok);
  }

  /**
   * Sends what every one of `leases` owes in one guarded attempt and one place in the refill queue
   * (the store gathers the ops into calls); resolves whether the store took it all. A refusal
   * builds no op, so what they owe stays on the leases; what a failed or timed-out attempt built
   * has left them (it lands late, or is counted unreported).
   */
  settleMany(leases: readonly Lease[], limits?: readonly LimitSpec[]): Promise<boolean> {
    const send = () => this.#queue(() => this.#sendAllOwed(leases, undefined, limits));
    return this.#store.guard.run(send).then((result) => result.ok);
  }

  /**
   * `close()`'s last word: what every one of `leases` owes, sent to the store at once (it gathers
   * them into calls) past an open breaker (a brief blip must not cost every leased token), under
   * one timeout. Resolves whether the store took it all. A settle per key, each with a timer and a
   * place in the refill queue, closed a limiter holding 100,000 keys in 1.6 s against a 1 s wait,
   * with a failure event for each of the 45,000 keys still queued when their timers fired.
   */
  handBack(leases: Iterable<Lease>, timeoutMs: number): Promise<boolean> {
    return this.#store.guard.force(() => this.#sendAllOwed(leases), timeoutMs).then((result) => result.ok);
  }

  /**
   * Sends what every one of `leases` owes in one guarded attempt and one place in the refill
   * queue, calling `sending` as they leave it; resolves once the store has answered every op, past the guard's timeout if need be,
   * or at once when the breaker refused the attempt (what they owe stays on the leases).
   */
  settleAll(leases: readonly Lease[], sending: () => void): Promise<void> {
    return new Promise<void>((answered) => {
      const send = () => this.#queue(() => this.#sendAllOwed(leases, sending).finally(answered));
      void this.#store.guard.run(send).then((result) => {
        if (!result.ok && !(result.error instanceof StoreTimeoutError)) answered();
      });
    });
  }

  /**
   * What every one of `leases` owes, each as an op of its own (`sending` called first); rejects when
   * any failed, once all answered; `NOTHING_SENT` when none owed anything.
   */
  #sendAllOwed(
    leases: Iterable<Lease>,
    sending?: () => void,
    limits?: readonly LimitSpec[],
  ): Promise<unknown> {
    sending?.();
    const sent: Promise<void>[] = [];
    for (const lease of leases) {
      const owed = this.#sendOwed(lease, undefined, undefined, limits);
      if (owed !== undefined) sent.push(owed);
    }
    return sent.length === 0 ? Promise.resolve(NOTHING_SENT) : allAnswered(sent);
  }

  /**
   * Sends what `lease` owes (and a `credit` or `debit`) straight to the store, with nothing asked
   * in return; `undefined` when there is nothing to send. Rejects when the store failed: what the
   * op carried is counted as lost, never sent again.
   */
  #sendOwed(
    lease: Lease,
    credit: number | undefined,
    debit: number | undefined,
    limits?: readonly LimitSpec[],
    wait?: CallerWait,
  ): Promise<void> | undefined {
    // `reward` and `penalty` (a credit, a debit) have a caller waiting on them; a hand-back has not,
    // and one sent late still counts (its generation tells the store what it may credit).
    const background = credit === undefined && debit === undefined;
    if (!background && wait?.gaveUp === true) return withdrawn();
    const op = this.#op(lease, undefined, background, credit, debit, limits);
    if (op === undefined) return undefined;
    this.#counters.refunds++;
    return this.#store.store.apply(op, background ? undefined : wait).then(
      () => {
        this.#counters.tokensRefunded += returned(op);
      },
      (error: unknown) => {
        this.#counters.tokensUnreported += unreported(op);
        throw error;
      },
    );
  }

  /**
   * The store calls queued or sent that have not answered yet, timed out or not: once they have,
   * no grant can land any more (`close()` waits for them before it is done).
   */
  landing(): Promise<unknown>[] {
    return [...this.#landing];
  }

  #call(lease: Lease, ask: (sentAt: number) => Ask): Promise<GuardResult<BucketReply>> {
    const call = this.#store.guard.run((wait) =>
      this.#queued(() => {
        if (wait.gaveUp) return withdrawn();
        const sentAt = this.#clock.now();
        return this.#exchange(lease, ask(sentAt), false, sentAt, wait);
      }),
    );
    lease.refill = call;
    void call.then(() => {
      if (lease.refill === call) lease.refill = undefined;
    });
    return call;
  }

  /**
   * Sends `lease`'s op (what it owes, and `ask`) sent at `sentAt`, and applies the reply to the
   * lease; what a failed op carried is counted unreported, never resent.
   */
  #exchange(
    lease: Lease,
    ask: Ask,
    background: boolean,
    sentAt: number,
    wait?: CallerWait,
  ): Promise<BucketReply> {
    // The grant's life is fixed with its op: a reply that lands after a retime keeps the hold it was sent with.
    const lifeMs = grantLifeMs(ask, this.#config.timing);
    const op = this.#op(lease, ask, background) ?? { key: lease.key, limits: this.#limits() };
    if (op.reserve !== undefined || op.take !== undefined) this.#counters.refills++;
    else this.#counters.refunds++;
    return this.#store.store.apply(op, wait).then(
      (reply) => {
        this.#apply(lease, op, reply, sentAt, lifeMs);
        return reply;
      },
      (error: unknown) => {
        this.#counters.tokensUnreported += unreported(op);
        throw error;
      },
    );
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

  #apply(lease: Lease, op: BucketOp, reply: BucketReply, sentAt: number, lifeMs?: number): void {
    // A reply is a moment the main thread runs anyway: bring the shared clock up to date too.
    touchSharedClock();
    const { leased, dry } = applyReply(
      lease,
      op,
      reply,
      sentAt,
      this.#clock.now(),
      this.#counters,
      this.#config,
      lifeMs,
    );
    this.#onReply(lease, leased, dry, op.limits === this.#limits() ? undefined : op.limits);
  }
}

/**
 * What a queued call resolves when the guard gave up on it before its turn: nothing is built, so
 * nothing leaves the lease's books, and the guard, settled already, reads nothing of it.
 */
function withdrawn(): Promise<never> {
  return Promise.reject(new StoreWithdrawnError());
}
