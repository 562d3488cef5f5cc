import { defineLimit, perMinute, perSecond } from '@tiered-limiter/core';

/** `/login`: 5 attempts, then 1 every 12 s, per client. Fails closed: no Redis, no login. */
export const LOGIN = perMinute(5, { name: 'login' });

/** `/api/items`: 20 per second per client, a burst of 20. Fails open: an outage of Redis is not one of the API. */
export const ITEMS = perSecond(20, { name: 'items' });

/**
 * `/api/report`: 10 units, refilled at 1 per second, per client; a report costs one unit per
 * week of data (`?days=30` costs 5). Fails closed: it is the expensive route.
 */
export const REPORT = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'report' });

/** Units a report of `days` days costs: one per week, from 1 to the limit's capacity. */
export function reportCost(days: number): number {
  if (!Number.isFinite(days)) return 1;
  return Math.min(REPORT.capacity, Math.max(1, Math.ceil(days / 7)));
}

/**
 * ms a store call on a fail-closed route may take before the limiter gives up and refuses:
 * wider than the library's 20 ms default, because there a timeout turns a legitimate login away.
 */
export const CLOSED_ROUTE_TIMEOUT_MS = 100;
