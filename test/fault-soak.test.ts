/**
 * Faults at random on a real Redis, with every limiter and every failure policy under load at
 * once: pauses, frozen and killed servers, flushed scripts and dropped connections, one after
 * another in an order each run draws afresh, while decisions, management calls, `acquire`s and
 * closes go on. The scripted fault tests (`faults.test.ts`) take one fault at a time; this one
 * takes them as they come, a fault on the heels of the recovery from the last one. Every run has
 * a new seed, printed on failure; `SOAK_SEED` replays one, `SOAK_CLIENT` picks the client library
 * and `SOAK_MS` runs longer.
 */
import {
  connectServer,
  runSoak,
  type SoakConfig,
  serverFault,
  soakSettings,
  whenReady,
} from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { beforeAll, it } from 'vitest';
import { redisForFile } from './src/redis-for-file.js';

const { runMs: RUN_MS, seed: SEED, kind: KIND } = soakSettings();
/** Every limiter under every policy it accepts (optimistic cold start refuses `closed`). */
const CONFIGS: readonly SoakConfig[] = [
  { kind: 'tiered', policy: 'open' },
  { kind: 'tiered', policy: 'closed' },
  { kind: 'tiered', policy: 'local' },
  { kind: 'optimistic', policy: 'open' },
  { kind: 'optimistic', policy: 'local' },
  { kind: 'request', policy: 'open' },
  { kind: 'request', policy: 'closed' },
  { kind: 'request', policy: 'local' },
];

const server = redisForFile();
let admin: Redis;

beforeAll(async () => {
  admin = server.client({ maxRetriesPerRequest: 1 });
  admin.on('error', () => {});
  await whenReady(admin);
});

it(
  'decides every request by its policy within budget, recovers, and leaks nothing',
  async () => {
    const restartable = server.source === 'process';
    const target = {
      server,
      admin,
      restartable,
      pid: async () => {
        if (!restartable) return undefined;
        const info = await admin.info('server');
        return Number(/process_id:(\d+)/.exec(info)?.[1]);
      },
    };
    await runSoak({
      configs: CONFIGS,
      connect: () => connectServer(KIND, server),
      fault: (random) => serverFault(target, random),
      seed: SEED,
      runMs: RUN_MS,
      label: KIND,
    });
  },
  RUN_MS + 60_000,
);
