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

/**
 * What a lease asks of the store, beside the reports it owes: a take, or a lease of `want` tokens
 * (at least `min`) that lives `spans` sync intervals (1 unless said).
 */
export type Ask = { take: number } | { want: number; min: number; spans?: number } | undefined;

/**
 * How long the grant `ask` brings lives here: `ttlMs`, and a sync interval (`spanMs`) more for
 * each interval beyond the first it spans. The store holds it as much longer (`leaseOp`), so a
 * token is still spent before its generation is released (docs/ACCURACY.md, Fact 3).
 */
export function grantLifeMs(ask: Ask, timing: TieredConfig['timing']): number {
  const spans = ask !== undefined && 'want' in ask && ask.spans !== undefined ? ask.spans : 1;
  return spansLifeMs(spans, timing);
}

/**
 * How long a grant that spans `spans` sync intervals lives here: `ttlMs`, and `spanMs` more for
 * each beyond the first.
 */
export function spansLifeMs(spans: number, timing: TieredConfig['timing']): number {
  return timing.ttlMs + (spans - 1) * timing.spanMs;
}

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
    else
      op.reserve = {
        want: ask.want,
        min: ask.min,
        holdMs: timing.holdMs - timing.ttlMs + grantLifeMs(ask, timing),
      };
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
