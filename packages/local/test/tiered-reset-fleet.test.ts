import { perMinute } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { sleepAtLeast } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';

const open: TieredLimiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

/** Two instances on one store, B having turned `alice` away (5 a minute: a 12 s wait), A resetting her. */
async function lockedOutThenReset(sync: false | undefined) {
  const store = new MemoryStore();
  const options = { store, limits: perMinute(5, { name: 'login' }), failurePolicy: 'closed' as const, sync };
  const [a, b] = [new TieredLimiter(options), new TieredLimiter(options)];
  open.push(a, b);
  const before = [];
  for (let i = 0; i < 6; i++) before.push((await b.consume('alice')).allowed);
  expect(before).toEqual([true, true, true, true, true, false]);
  expect(await a.reset('alice')).toBe(true);
  return b;
}

describe("reset on one instance and another's remembered denial (README: reset)", () => {
  it('with the periodic sync, the other instance admits the key again within about a period', async () => {
    const b = await lockedOutThenReset(undefined);
    let admitted = false;
    for (let i = 0; i < 40 && !admitted; i++) {
      await sleepAtLeast(25);
      admitted = (await b.consume('alice')).allowed;
    }
    expect(admitted).toBe(true);
  });

  it('with sync: false, the other instance keeps the denial until its wait is over', async () => {
    const b = await lockedOutThenReset(false);
    await sleepAtLeast(100);
    const decision = await b.consume('alice');
    expect(decision).toMatchObject({ allowed: false, tier: 'lease' });
    expect(decision.retryAfterMs).toBeGreaterThan(10_000);
  });
});
