import type { BucketOp, LimitSpec } from '@tiered-limiter/core';
import type { Lease } from './lease.js';
import { takeReports } from './lease-reports.js';
import type { TieredConfig } from './options.js';

/** Options of `Refiller.settle`: what a settle op carries beside the lease's reports. */
export interface SettleOptions {
  /** Tokens to give back to the key (`reward`). */
  readonly credit?: number | undefined;
  /** Tokens to take from the key regardless (`penalty`). */
  readonly debit?: number | undefined;
}

/** What a lease asks of the store, beside the reports it owes. */
export type Ask = { take: number } | { want: number; min: number } | undefined;

/**
 * The op for `lease` under `limits`: what it owes (its reports and debt, taken off its books now,
 * as the op leaves), a `credit` or `debit`, and what it asks; `undefined` when there is none of
 * these. A `background` op is one no request waits on: the store sends those that requests wait
 * on first.
 */
export function leaseOp(
  lease: Lease,
  ask: Ask,
  background: boolean,
  limits: readonly LimitSpec[],
  timing: TieredConfig['timing'],
  credit = 0,
  debit = 0,
): BucketOp | undefined {
  const reports = takeReports(lease);
  const debt = lease.debt + debit;
  if (ask === undefined && reports === undefined && debt === 0 && credit === 0) return undefined;
  const op: { -readonly [K in keyof BucketOp]: BucketOp[K] } = { key: lease.key, limits, reports };
  if (debt > 0) {
    // Tokens admitted before the store heard of the key ride first: the bucket may go into debt.
    op.debit = debt;
    lease.debt = 0;
  }
  if (credit > 0) op.credit = credit;
  if (background) op.background = true;
  if (ask !== undefined) {
    if ('take' in ask) op.take = ask.take;
    else op.reserve = { want: ask.want, min: ask.min, holdMs: timing.holdMs };
    if (timing.aheadMs > 0) op.aheadMs = timing.aheadMs;
  }
  return op;
}

/** A take of `cost` tokens for `key`, with no lease: a sparse key's first hit. */
export function takeOp(
  key: string,
  cost: number,
  limits: readonly LimitSpec[],
  timing: TieredConfig['timing'],
): BucketOp {
  return timing.aheadMs > 0
    ? { key, limits, take: cost, aheadMs: timing.aheadMs }
    : { key, limits, take: cost };
}

/** Tokens `op` carried that the store may never have heard of, when its call failed: its debit and its reports. */
export function unreported(op: BucketOp): number {
  let tokens = op.debit ?? 0;
  if (op.reports !== undefined) for (const r of op.reports) tokens += r.spent + r.returned;
  return tokens;
}
