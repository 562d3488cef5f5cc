import { randomBytes } from 'node:crypto';
import { recommendedRedisOptions } from '@tiered-limiter/redis';
import {
  ClientSet,
  type CommandStats,
  type RedisServer,
  readCommandStats,
  readServerCpuSeconds,
  startRedis,
  whenReady,
} from '@tiered-limiter/test-harness';
import { Redis } from 'ioredis';
import { Probe, type ProbeWindows } from './health.js';

/** What a row needs of the run's Redis, in the process that measures it. */
export interface RowRedis {
  readonly url: string;
  /** Watches Redis from another process while the row runs. */
  readonly probe: ProbeWindows;
  /** A new connected client with `recommendedRedisOptions`, disconnected by `close()` if not before. */
  client(): Promise<Redis>;
  /** Redis's own per-command counters (`INFO commandstats`), read through an admin connection. */
  commandStats(): Promise<CommandStats>;
  /** CPU seconds the server has used (`INFO cpu`): commands, I/O and expiry alike. */
  serverCpuSeconds(): Promise<number>;
  /** Disconnects every client made here. */
  close(): void;
}

export function rowRedis(url: string, probe: ProbeWindows): RowRedis {
  const clients = new ClientSet();
  const admin = clients.add(new Redis(url));
  return {
    url,
    probe,
    async client() {
      const client = clients.add(new Redis(url, { ...recommendedRedisOptions, lazyConnect: true }));
      await client.connect();
      await whenReady(client);
      return client;
    },
    commandStats: () => readCommandStats(admin),
    serverCpuSeconds: () => readServerCpuSeconds(admin),
    close: () => clients.disconnectAll(),
  };
}

/** The Redis every row of one run uses, and what the run put in it. */
export interface BenchRedis {
  readonly url: string;
  /** One line for the user: which server, and what happens to it and to the keys. */
  readonly description: string;
  readonly source: RedisServer['source'];
  /** `redis_version` from `INFO server`. */
  readonly version: string;
  /** Every key this run writes starts with it; `cleanup()` deletes exactly those. */
  readonly prefix: string;
  /** An independent client in a process of its own, watching Redis while rows run. */
  readonly probe: Probe;
  /** Deletes this run's keys (SCAN MATCH prefix*, UNLINK); resolves to how many. */
  cleanup(): Promise<number>;
  /** Stops the probe, disconnects, and stops the server if this run started it. */
  stop(): Promise<void>;
}

/**
 * How long the run's Redis may take to connect and answer a first `INFO`: a server answers in ms,
 * a loaded one well within this.
 */
export const OPEN_TIMEOUT_MS = 10_000;

/** Raised when no Redis can be had; `main` prints its message alone. */
export class NoRedisError extends Error {}

/**
 * `REDIS_URL` if set (used as is: nothing flushed, only this run's keys deleted), else a throwaway
 * `redis-server` from PATH on a free loopback port, else a testcontainers `redis:7`.
 */
export async function openRedis(): Promise<BenchRedis> {
  let server: RedisServer;
  try {
    server = await startRedis();
  } catch (error) {
    throw new NoRedisError(
      `${(error as Error).message.replace('No Redis for the tests.', 'No Redis for the benchmarks.')}`,
      { cause: error },
    );
  }
  const admin = server.client({ lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
  let connectError: Error | undefined;
  admin.once('error', (error) => {
    connectError = error;
  });
  // ioredis bounds the TCP connect alone: a REDIS_URL port that accepted and never answered
  // (a listener that is not Redis) left the bench waiting for the ready check's INFO for ever.
  let timer: NodeJS.Timeout | undefined;
  const silent = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${OPEN_TIMEOUT_MS / 1000} s`)), OPEN_TIMEOUT_MS);
  });
  const answered = admin.connect().then(() => admin.info('server'));
  // Once the wait is given up, the disconnect below rejects it: not an unhandled rejection.
  answered.catch(() => {});
  let version: string;
  try {
    const info = await Promise.race([answered, silent]);
    version = /^redis_version:(\S+)/m.exec(info)?.[1] ?? 'unknown';
  } catch (error) {
    admin.disconnect();
    await server.stop();
    const reason = (connectError ?? (error as Error)).message.replace(/\.$/, '');
    throw new NoRedisError(
      `Cannot reach Redis at ${redact(server.url)}: ${reason}. ` +
        'Check REDIS_URL, or unset it to let the bench start its own redis-server.',
      { cause: error },
    );
  } finally {
    clearTimeout(timer);
  }
  const prefix = `tlbench-${process.pid.toString(36)}-${randomBytes(3).toString('hex')}`;
  const probe = await Probe.start(server.url);

  return {
    url: server.url,
    source: server.source,
    version,
    prefix,
    probe,
    description: describe(server, version, prefix),
    async cleanup() {
      let deleted = 0;
      let cursor = '0';
      do {
        const [next, keys] = await admin.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) deleted += await admin.unlink(...keys);
      } while (cursor !== '0');
      return deleted;
    },
    async stop() {
      probe.close();
      admin.disconnect();
      await server.stop();
    },
  };
}

function describe(server: RedisServer, version: string, prefix: string): string {
  const keys = `keys under "${prefix}*", deleted at the end`;
  switch (server.source) {
    case 'env':
      return `Redis ${version} at REDIS_URL=${redact(server.url)} (nothing flushed; ${keys})`;
    case 'process':
      return `a throwaway redis-server ${version} from PATH on ${server.host}:${server.port} (stopped at the end)`;
    case 'container':
      return `a throwaway redis:7 container (testcontainers), Redis ${version} at ${server.host}:${server.port} (removed at the end)`;
  }
}

function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparsable REDIS_URL)';
  }
}
