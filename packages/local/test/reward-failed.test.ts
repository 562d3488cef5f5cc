import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock, ScriptedStore } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';

/** Lets background hand-backs finish. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** One token, back after 1,000 s: a denial stays true for the whole test. */
const ONE = defineLimit({ capacity: 1, refillPerSecond: 0.001, name: 'one' });

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

describe('a reward that did not reach the store', () => {
  it.each(['RequestLimiter', 'TieredLimiter'] as const)(
    '%s keeps the denial it remembered: the next request is turned away with no store op, not admitted by the failure policy',
    async (kind) => {
      const clock = new FakeClock(1_000);
      const store = new ScriptedStore(new MemoryStore({ clock }));
      const common = { store, limits: ONE, failurePolicy: 'open' as const, clock, timeoutMs: 10_000 };
      const limiter =
        kind === 'RequestLimiter'
          ? new RequestLimiter({ ...common, rememberDenials: true })
          : new TieredLimiter({ ...common, sync: false });
      open.push(limiter);
      const decide = async () => {
        const decision = await limiter.consume('k');
        await settle();
        return decision;
      };
      expect((await decide()).allowed).toBe(true);
      expect((await decide()).allowed).toBe(false);
      // The denial is remembered: the next costs no store op.
      const calls = store.calls.length;
      expect((await decide()).allowed).toBe(false);
      expect(store.calls.length).toBe(calls);
      store.mode = 'reject';
      expect(await limiter.reward('k', 1)).toBe(false);
      // Before: the failed reward forgot the denial, the next request went to the failing store
      // and the `open` policy admitted it, though the bucket had no token.
      const after = await decide();
      expect(after.allowed).toBe(false);
      expect(store.calls.length).toBe(calls + 1);
      // A reward that lands still forgets the denial: the token it gave is taken at once.
      store.mode = 'ok';
      expect(await limiter.reward('k', 1)).toBe(true);
      expect((await decide()).allowed).toBe(true);
    },
  );
});

describe('a reset that did not reach the store (README: it has still forgotten the key here)', () => {
  it.each([
    ['RequestLimiter', 'open', true],
    ['TieredLimiter', 'open', true],
    ['RequestLimiter', 'closed', false],
    ['TieredLimiter', 'closed', false],
  ] as const)(
    '%s under %s: the next request meets the policy, which admits: %s',
    async (kind, policy, admits) => {
      const clock = new FakeClock(1_000);
      const store = new ScriptedStore(new MemoryStore({ clock }));
      const common = { store, limits: ONE, failurePolicy: policy, clock, timeoutMs: 10_000 };
      const limiter =
        kind === 'RequestLimiter'
          ? new RequestLimiter({ ...common, rememberDenials: true })
          : new TieredLimiter({ ...common, sync: false });
      open.push(limiter);
      expect((await limiter.consume('k')).allowed).toBe(true);
      expect((await limiter.consume('k')).allowed).toBe(false);
      await settle();
      store.mode = 'reject';
      expect(await limiter.reset('k')).toBe(false);
      const calls = store.calls.length;
      const after = await limiter.consume('k');
      // The request went to the store (no remembered denial answered it) and the policy decided.
      expect(store.calls.length).toBe(calls + 1);
      expect(after).toMatchObject({ allowed: admits, tier: 'fallback', policy });
    },
  );
});
