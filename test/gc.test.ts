import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

interface Cost {
  readonly bytesEach: number;
  readonly msEach: number;
}
interface Report {
  readonly dropped: number;
  readonly alive: number;
  readonly finalized: number;
  readonly heldClock: number;
  readonly sharedAtStart: boolean;
  readonly clockStill: boolean;
  readonly newClockAfter: boolean;
  readonly construction: Record<'local' | 'tiered' | 'request' | 'upFront', Cost>;
}

// Issue 9 §4: a limiter dropped without close() is garbage-collected, the shared clock's worker
// thread stops with its last user, and a limiter costs little to build at the default maxKeys. Run
// in a child with --expose-gc (test/gc/dropped-limiters.ts), on the sources through tsx.
describe('memory of dropped and new limiters', () => {
  const run = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', 'test/gc/dropped-limiters.ts'], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
  });

  const report = (): Report => {
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    return JSON.parse(run.stdout.trim()) as Report;
  };

  it('collects every TieredLimiter dropped unclosed, after it held leases and ran its sweep', () => {
    const { dropped, alive, finalized } = report();
    expect(dropped).toBe(10);
    expect(alive).toBe(0);
    expect(finalized).toBe(10);
  });

  it('stops the shared clock thread once no limiter is left', () => {
    const { heldClock, sharedAtStart, clockStill, newClockAfter } = report();
    // Each dropped limiter was busy enough to hold the thread when it was let go.
    expect(heldClock).toBe(10);
    expect(sharedAtStart).toBe(true);
    // Its clock stopped moving, and the next user got a clock of its own.
    expect(clockStill).toBe(true);
    expect(newClockAfter).toBe(true);
  });

  it('builds a limiter at the default maxKeys with far less than 1 MB (a table grows with use)', () => {
    const { construction } = report();
    console.log(
      Object.entries(construction)
        .map(([name, c]) => `${name}: ${(c.bytesEach / 1024).toFixed(1)} KB, ${c.msEach.toFixed(3)} ms each`)
        .join('; '),
    );
    // The measurement sees a table sized up front (lru-cache `max: 100_000`, as before): 2.8 MB.
    expect(construction.upFront.bytesEach).toBeGreaterThan(1_000_000);
    for (const name of ['local', 'tiered', 'request'] as const) {
      expect(construction[name].bytesEach).toBeLessThan(100_000);
    }
  });
});
