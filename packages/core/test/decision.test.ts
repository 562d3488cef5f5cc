import { allowDecision, defineLimit, denyDecision, StoreError, shadowOf } from '@tiered-limiter/core';
import { describe, expect, it } from 'vitest';

const spec = (capacity: number) => defineLimit({ capacity, refillPerSecond: 1, name: 'l' });

describe('Decision constructors', () => {
  it('allowDecision admits with retryAfterMs 0 and a remaining from 0 to the capacity', () => {
    expect(allowDecision(3, 250, spec(10), 'local')).toEqual({
      allowed: true,
      remaining: 3,
      retryAfterMs: 0,
      resetMs: 250,
      limit: 10,
      name: 'l',
      tier: 'local',
      policy: undefined,
      error: undefined,
      shadowDenied: false,
    });
    expect(allowDecision(-2, 0, spec(10), 'lease').remaining).toBe(0);
    // A lease's tokens on top of a bucket that forgot the lease (an evicted key): never past the limit.
    expect(allowDecision(12, 0, spec(10), 'lease').remaining).toBe(10);
  });

  it('denyDecision raises retryAfterMs to a whole number of at least 1', () => {
    expect(denyDecision(0, 0, 1000, spec(10), 'global').retryAfterMs).toBe(1);
    expect(denyDecision(0.2, 0, 1000, spec(10), 'global').retryAfterMs).toBe(1);
    expect(denyDecision(99.01, 0, 1000, spec(10), 'global').retryAfterMs).toBe(100);
    expect(denyDecision(100, -1, 1000, spec(10), 'global')).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('carries the policy and the error of a fallback decision', () => {
    const error = new StoreError('down');
    const d = denyDecision(1000, 0, 0, spec(5), 'fallback', 'closed', error);
    expect(d.policy).toBe('closed');
    expect(d.error).toBe(error);
  });

  it('builds every decision with the same fields in the same order', () => {
    const order = Object.keys(allowDecision(1, 1, spec(1), 'local'));
    expect(Object.keys(denyDecision(1, 1, 1, spec(1), 'local'))).toEqual(order);
    expect(Object.keys(shadowOf(denyDecision(1, 1, 1, spec(1), 'local')))).toEqual(order);
  });

  it('shadowOf admits what would be denied, keeps the rest, and keeps denied ⇔ retryAfterMs > 0', () => {
    const denied = denyDecision(40, 0, 900, spec(10), 'local');
    const shadow = shadowOf(denied);
    expect(shadow).toEqual({ ...denied, allowed: true, retryAfterMs: 0, shadowDenied: true });
    const allowed = allowDecision(5, 10, spec(10), 'local');
    expect(shadowOf(allowed)).toBe(allowed);
  });
});
