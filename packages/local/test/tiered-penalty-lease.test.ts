import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';

/** Lets background refills and hand-backs (promise chains through p-limit) finish. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** 100 tokens, one a second: nothing refills while the fake clock stands still. */
const HUNDRED = defineLimit({ capacity: 100, refillPerSecond: 1, name: 'hundred' });

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

/** How many of `n` decisions for `key` are admitted, one after another, the hot path first. */
async function admitted(limiter: TieredLimiter | RequestLimiter, key: string, n: number) {
  let count = 0;
  for (let i = 0; i < n; i++) {
    const fast = limiter instanceof TieredLimiter ? limiter.tryConsume(key) : undefined;
    if ((fast ?? (await limiter.consume(key))).allowed) count++;
    await settle();
  }
  return count;
}

describe('penalty on a key this instance holds a lease for', () => {
  it('puts the bucket in debt and denies the next request, as RequestLimiter does', async () => {
    const clock = new FakeClock(1_000);
    const request = new RequestLimiter({
      store: new MemoryStore({ clock }),
      limits: HUNDRED,
      failurePolicy: 'closed',
      clock,
    });
    // A minimum batch of 20 leases at the first request: 17 of them still held after 3 requests.
    const tiered = new TieredLimiter({
      store: new MemoryStore({ clock }),
      limits: HUNDRED,
      failurePolicy: 'closed',
      clock,
      sync: false,
      lease: { minBatch: 20 },
    });
    open.push(request, tiered);
    for (const limiter of [request, tiered]) {
      expect(await admitted(limiter, 'k', 3)).toBe(3);
      // 97 left, less 100: 3 in debt.
      expect(await limiter.penalty('k', 100)).toBe(true);
      await settle();
    }
    expect(await admitted(request, 'k', 20)).toBe(0);
    expect(await admitted(tiered, 'k', 20)).toBe(0);
    // The debt is the same on both: 3 tokens' refill, then one more for a token.
    clock.advance(3_999);
    expect(await admitted(request, 'k', 1)).toBe(0);
    expect(await admitted(tiered, 'k', 1)).toBe(0);
    clock.advance(1);
    expect(await admitted(request, 'k', 1)).toBe(1);
    expect(await admitted(tiered, 'k', 1)).toBe(1);
  });
});
