import { defineLimit } from '@tiered-limiter/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addGrant, type Grant, Lease } from '../src/tiered/lease.js';
import { forgetReleased, takeReports } from '../src/tiered/lease-reports.js';

const LIMIT = defineLimit({ name: 'l', capacity: 100, refillPerSecond: 10 });

/** A grant as the tests see it: its fields, copied. */
const view = (lease: Lease) =>
  lease.grants.map(({ generation, expiresAtMs, left, spent, returning }) => ({
    generation,
    expiresAtMs,
    left,
    spent,
    returning,
  }));

const grantsArb = fc.array(
  fc.record({ expiresAtMs: fc.integer({ min: 0, max: 50 }), tokens: fc.integer({ min: 1, max: 9 }) }),
  { minLength: 1, maxLength: 8 },
);

describe('a lease’s grants', () => {
  it('stay in order of expiry, however they arrive, and the head is the first with tokens', () => {
    fc.assert(
      fc.property(grantsArb, (grants) => {
        const lease = new Lease('k', 0, LIMIT);
        for (const [i, { expiresAtMs, tokens }] of grants.entries())
          addGrant(lease, i + 1, expiresAtMs, tokens);
        const expiries = lease.grants.map((g) => g.expiresAtMs);
        expect(expiries).toEqual([...expiries].sort((a, b) => a - b));
        // Grants of equal expiry keep the order they came in (the store's generations).
        for (let i = 1; i < lease.grants.length; i++) {
          const [a, b] = [lease.grants[i - 1]!, lease.grants[i]!];
          if (a.expiresAtMs === b.expiresAtMs) expect(a.generation).toBeLessThan(b.generation);
        }
        expect(lease.tokens).toBe(grants.reduce((sum, g) => sum + g.tokens, 0));
        expect(lease.head).toBe(lease.grants[0]);
      }),
    );
  });

  it('reported in full leave the books, the rest in order, and the next grant reuses one with fresh counts', () => {
    fc.assert(
      fc.property(grantsArb, fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }), (grants, spentOut) => {
        const lease = new Lease('k', 0, LIMIT);
        for (const [i, { expiresAtMs, tokens }] of grants.entries())
          addGrant(lease, i + 1, expiresAtMs, tokens);
        // Some grants spent to the last token, the others one token short.
        lease.grants.forEach((grant, i) => {
          const spend = spentOut[i] ? grant.left : grant.left - 1;
          grant.left -= spend;
          grant.spent += spend;
          lease.tokens -= spend;
        });
        const before = view(lease);
        const reports = takeReports(lease);
        const spent = before.filter((g) => g.spent > 0);
        if (spent.length === 0) {
          // Nothing to report: the books stay as they are.
          expect(reports).toBeUndefined();
          expect(view(lease)).toEqual(before);
          expect(lease.spare).toBeUndefined();
          return;
        }
        expect(reports).toEqual(
          spent.map((g) => ({ generation: g.generation, spent: g.spent, returned: 0 })),
        );
        const kept = before.filter((g) => g.left > 0).map((g) => ({ ...g, spent: 0 }));
        expect(view(lease)).toEqual(kept);
        const dropped = before.length - kept.length;
        expect(lease.spare === undefined).toBe(dropped === 0);
        const spare = lease.spare;
        addGrant(lease, 99, 25, 3);
        const added = lease.grants.find((g) => g.generation === 99)!;
        if (spare !== undefined) expect(added).toBe(spare);
        expect(lease.spare).toBeUndefined();
        expect({ left: added.left, spent: added.spent, returning: added.returning }).toEqual({
          left: 3,
          spent: 0,
          returning: 0,
        });
        const expiries = lease.grants.map((g) => g.expiresAtMs);
        expect(expiries).toEqual([...expiries].sort((a, b) => a - b));
      }),
    );
  });

  it('used up and released leave the books; a grant with tokens or a hand-back owed stays', () => {
    const lease = new Lease('k', 0, LIMIT);
    addGrant(lease, 1, 10, 2);
    addGrant(lease, 2, 20, 2);
    addGrant(lease, 3, 30, 2);
    addGrant(lease, 4, 40, 2);
    const [g1, g2, g3, g4] = lease.grants as [Grant, Grant, Grant, Grant];
    g1.left = 0; // used up, expired before 25: released
    g2.left = 0;
    g2.returning = 1; // a hand-back still owed
    g3.left = 0; // used up, but expires after 25
    forgetReleased(lease, 25);
    expect(lease.grants).toEqual([g2, g3, g4]);
    expect(lease.spare).toBe(g1);
  });
});
