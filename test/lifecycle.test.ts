import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const TEST_DIR = fileURLToPath(new URL('.', import.meta.url));

/** Runs `script` as an ES module in a plain `node` of its own, killed after 20 s. */
const runModule = (script: string) =>
  spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: TEST_DIR,
    encoding: 'utf8',
    timeout: 20_000,
  });

describe('lifecycle', () => {
  it("a limiter's timers never keep the process alive", () => {
    // Built packages, as a service runs them; nothing is closed, so only unref'd timers remain.
    const script = `
      import { perSecond } from '@tiered-limiter/core';
      import { LocalLimiter, MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
      const store = new MemoryStore();
      const tiered = new TieredLimiter({ store, limits: perSecond(100), failurePolicy: 'local', instances: 2 });
      const request = new RequestLimiter({ store, limits: perSecond(100), failurePolicy: 'open' });
      new LocalLimiter({ limits: perSecond(1) }).tryConsume('k');
      for (let i = 0; i < 50; i++) await tiered.consume('k');
      await request.consume('k');
      console.log('done', tiered.stats().decisions.lease > 0);
    `;
    const started = performance.now();
    const run = runModule(script);
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('done true');
    expect(run.status).toBe(0);
    // The coarse clock ticks every 5 ms forever: had it been ref'd, the timeout above would kill it.
    expect(performance.now() - started).toBeLessThan(15_000);
  });

  it('a pending acquire() keeps the process alive until it resolves', () => {
    // The key's one token is spent, the next comes 400 ms later: the process must live to see the
    // acquire resolve (nothing else holds the event loop), then exit on its own.
    const script = `
      import { defineLimit } from '@tiered-limiter/core';
      import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
      const limits = defineLimit({ capacity: 1, refillPerSecond: 2.5 });
      const tiered = new TieredLimiter({ store: new MemoryStore(), limits, failurePolicy: 'closed' });
      await tiered.consume('k');
      const started = performance.now();
      tiered.acquire('k', 1, { maxWaitMs: 5_000 }).then((result) => {
        console.log(result.reason, performance.now() - started >= 300);
      });
    `;
    const run = runModule(script);
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('acquired true');
    expect(run.status).toBe(0);
  });

  it('close() is idempotent and a closed limiter says so clearly', async () => {
    const { perSecond } = await import('@tiered-limiter/core');
    const { MemoryStore, TieredLimiter, RequestLimiter } = await import('@tiered-limiter/local');
    const tiered = new TieredLimiter({
      store: new MemoryStore(),
      limits: perSecond(10),
      failurePolicy: 'open',
    });
    const request = new RequestLimiter({
      store: new MemoryStore(),
      limits: perSecond(10),
      failurePolicy: 'open',
    });
    await tiered.close();
    await tiered.close();
    await request.close();
    expect(() => tiered.tryConsume('k')).toThrow(/TieredLimiter is closed/);
    expect(() => tiered.acquire('k')).toThrow(expect.objectContaining({ code: 'ERR_TL_CLOSED' }));
    expect(() => request.consume('k')).toThrow(/RequestLimiter is closed/);
  });
});
