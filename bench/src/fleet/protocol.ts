import type { PeerLimit } from '../limiters.js';

/** Which limiter an accuracy worker runs. */
export type AccuracyTier = 'request' | 'tiered' | 'rlf';

/** What one accuracy worker is told. */
export interface AccuracyOrders {
  readonly url: string;
  readonly prefix: string;
  readonly key: string;
  readonly tier: AccuracyTier;
  readonly capacity: number;
  readonly refillPerSecond: number;
  /** rate-limiter-flexible's nearest equivalent of the limit. */
  readonly peer: PeerLimit;
  readonly instances: number;
  readonly leaseTtlMs: number;
  readonly durationMs: number;
  readonly maxDecisions: number;
}

/** What one accuracy worker reports: its decisions, and when (`Date.now()`) it admitted. */
export interface AccuracyReport {
  readonly decisions: number;
  readonly admittedAt: number[];
  readonly stats: unknown;
}

export type ParentMessage = { readonly type: 'start'; readonly startAt: number };

export type WorkerMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'report'; readonly report: AccuracyReport };
