import {
  type CallerWait,
  type LimitSpec,
  StoreTimeoutError,
  StoreWithdrawnError,
} from '@tiered-limiter/core';
import type { LimitFunction } from 'p-limit';
import type { GuardedStore } from '../guard/guarded-store.js';
import { onLandedLate } from '../guard/landed-late.js';
import { NOTHING_SENT } from '../guard/store-guard.js';
import { allAnswered } from './all-answered.js';
import type { Lease } from './lease.js';
import { leaseOp, type SettleOptions, unreported } from './lease-op.js';
import type { TieredConfig } from './options.js';
import { returned } from './reply.js';
import type { TieredCounters } from './stats.js';
import { type Guarded, TurnAttempt } from './turn-attempt.js';

/** A turn's shared attempt under the breaker (`guarded`), or past it while closing (`forced`). */
type TurnKind = 'guarded' | 'forced';

/**
 * What leases owe the store, sent with nothing asked in return: hand-backs and spends (a key
 * evicted or drained, an owing lease retried, `close()`), optimistic charges, and a `reward`'s
 * credit or a `penalty`'s debit. It shares the refiller's guard and queue, and what a failed op
 * carried is counted unreported, never sent again.
 */
export class Settler {
  readonly #store: GuardedStore;
  readonly #queue: LimitFunction;
  readonly #counters: TieredCounters;
  readonly #limits: () => readonly LimitSpec[];
  readonly #timing: TieredConfig['timing'];
  /**
   * The attempts this turn's settles share until the turn is over: `guarded` under the breaker
   * (`settleInTurn`), `forced` past it while closing (`handBackInTurn`).
   */
  readonly #turns: Record<TurnKind, TurnAttempt | undefined> = { guarded: undefined, forced: undefined };

  constructor(
    store: GuardedStore,
    queue: LimitFunction,
    counters: TieredCounters,
    limits: () => readonly LimitSpec[],
    timing: TieredConfig['timing'],
  ) {
    this.#store = store;
    this.#queue = queue;
    this.#counters = counters;
    this.#limits = limits;
    this.#timing = timing;
  }

  /** The guard's timeout, in ms. */
  get timeoutMs(): number {
    return this.#store.guard.timeoutMs;
  }

  /**
   * Sends what `lease` owes the store (spends and hand-backs) with nothing asked in return, and a
   * `credit` or `debit` (`reward`, `penalty`: after the spends, so that a reward lands in the room
   * they free). Resolves whether the store took it; `landedLate` is called if the op lands after the
   * guard gave up on it (it was on its way).
   */
  settle(lease: Lease, { credit, debit }: SettleOptions = {}, landedLate?: () => void): Promise<boolean> {
    const send = (wait: CallerWait) =>
      this.#queue((): Promise<unknown> => {
        const sent = this.#sendOwed(lease, credit, debit, wait);
        if (sent === undefined) return Promise.resolve(NOTHING_SENT);
        onLandedLate(sent, wait, landedLate);
        return sent;
      });
    return this.#store.guard.run(send).then((result) => result.ok);
  }

  /**
   * Sends what `lease` owes the store (spends and hand-backs) under the guarded attempt every settle
   * asked for in this turn of the event loop shares (`TurnAttempt`), in its own place in the refill
   * queue. Resolves whether the store took all of that turn's; a refusal sends nothing.
   */
  settleInTurn(lease: Lease): Promise<boolean> {
    const turn = this.#turnOf('guarded', (attempt) => this.#store.guard.run(attempt));
    const wait = turn.wait;
    if (wait !== undefined)
      turn.add(
        this.#queue(
          (): Promise<unknown> =>
            this.#sendOwed(lease, undefined, undefined, wait) ?? Promise.resolve(NOTHING_SENT),
        ),
      );
    return turn.result;
  }

  /**
   * Hands back what `lease` owes (a grant that landed while `close()` runs) past the breaker, at
   * once, under the attempt every such hand-back of this turn shares, within `timeoutMs` (the first
   * of the turn's). Resolves whether the store took all of that turn's.
   */
  handBackInTurn(lease: Lease, timeoutMs: number): Promise<boolean> {
    const turn = this.#turnOf('forced', (attempt) => this.#store.guard.force(attempt, timeoutMs));
    // `force` never refuses: the attempt has its wait at once.
    if (turn.wait !== undefined)
      turn.add(this.#sendOwed(lease, undefined, undefined) ?? Promise.resolve(NOTHING_SENT));
    return turn.result;
  }

  /** This turn's attempt of `kind`, opened by `guarded` if it has none yet, and closed once the turn is over. */
  #turnOf(kind: TurnKind, guarded: Guarded): TurnAttempt {
    const turns = this.#turns;
    const open = turns[kind];
    if (open !== undefined) return open;
    const opened = new TurnAttempt(guarded);
    turns[kind] = opened;
    setImmediate(() => {
      turns[kind] = undefined;
      opened.close();
    });
    return opened;
  }

  /**
   * Sends what every one of `leases` owes in one guarded attempt and one place in the refill queue
   * (the store gathers the ops into calls); resolves whether the store took it all. A refusal
   * builds no op, so what they owe stays on the leases; what a failed or timed-out attempt built
   * has left them (it lands late, or is counted unreported).
   */
  settleMany(leases: readonly Lease[]): Promise<boolean> {
    const send = () => this.#queue(() => this.#sendAllOwed(leases));
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
  #sendAllOwed(leases: Iterable<Lease>, sending?: () => void): Promise<unknown> {
    sending?.();
    const sent: Promise<void>[] = [];
    for (const lease of leases) {
      const owed = this.#sendOwed(lease, undefined, undefined);
      if (owed !== undefined) sent.push(owed);
    }
    return sent.length === 0 ? Promise.resolve(NOTHING_SENT) : allAnswered(sent);
  }

  /**
   * Sends what `lease` owes (and a `credit` or `debit`) straight to the store, with nothing asked
   * in return, to a carrier's own limits; `undefined` when there is nothing to send. Rejects when
   * the store failed: what the op carried is counted as lost, never sent again.
   */
  #sendOwed(
    lease: Lease,
    credit: number | undefined,
    debit: number | undefined,
    wait?: CallerWait,
  ): Promise<void> | undefined {
    // `reward` and `penalty` (a credit, a debit) have a caller waiting on them; a hand-back has not,
    // and one sent late still counts (its generation tells the store what it may credit).
    const background = credit === undefined && debit === undefined;
    if (!background && wait?.gaveUp === true) return withdrawn();
    const op = leaseOp(
      lease,
      undefined,
      background,
      lease.grantedUnder ?? this.#limits(),
      this.#timing,
      credit ?? 0,
      debit ?? 0,
    );
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
}

/**
 * What a queued call resolves when the guard gave up on it before its turn: nothing is built, so
 * nothing leaves the lease's books, and the guard, settled already, reads nothing of it.
 */
export function withdrawn(): Promise<never> {
  return Promise.reject(new StoreWithdrawnError());
}
