import { Redis, type RedisOptions } from 'ioredis';
import { ClientSet, whenReady } from './clients.js';
import { findBinary, freePort, LOOPBACK, makeTempDir, RedisProcess, removeTempDir } from './processes.js';

/** Where a test's Redis came from. */
export type RedisSource = 'env' | 'process' | 'container';

/** A Redis server for tests, from `startRedis()`. */
export interface RedisServer {
  /** `'env'`: `REDIS_URL`; `'process'`: a `redis-server` from PATH; `'container'`: testcontainers. */
  readonly source: RedisSource;
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** A new ioredis client of this server, disconnected by `stop()`. */
  client(options?: RedisOptions): Redis;
  /** Disconnects the clients made by `client()` and stops the server if the harness started it. */
  stop(): Promise<void>;
  /** Stops the server (if it is running) and starts it again on the same port, empty. */
  restart(): Promise<void>;
  /** SIGKILLs the server, for fault tests; `restart()` brings it back. */
  kill(): Promise<void>;
}

const START_ATTEMPTS = 5;
const CONTAINER_IMAGE = 'redis:7';

/**
 * A Redis server for a test file, found in this order:
 * 1. `REDIS_URL` (an external server: `restart()` and `kill()` then throw);
 * 2. a `redis-server` binary on PATH, started as a throwaway server on a free loopback port,
 *    with `--save '' --appendonly no` and its own directory under the OS's temporary directory;
 * 3. testcontainers with `redis:7`, if Docker answers;
 * else it throws an Error saying what to install. Call `stop()` in `afterAll`; a process exit
 * kills whatever is left.
 *
 * @example
 * let redis: RedisServer;
 * beforeAll(async () => { redis = await startRedis(); });
 * afterAll(() => redis.stop());
 */
export async function startRedis(): Promise<RedisServer> {
  const url = process.env.REDIS_URL;
  if (url) return fromUrl(url);
  const binary = findBinary('redis-server');
  if (binary) return fromBinary(binary);
  let dockerError: unknown;
  try {
    return await fromContainer();
  } catch (error) {
    dockerError = error;
  }
  throw new Error(
    'No Redis for the tests. Do one of: install Redis so that `redis-server` is on PATH ' +
      '(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis); set REDIS_URL=redis://host:port; ' +
      `or start Docker so that testcontainers can run ${CONTAINER_IMAGE}.`,
    { cause: dockerError },
  );
}

function fromUrl(url: string): RedisServer {
  const parsed = new URL(url);
  const host = parsed.hostname;
  const port = Number(parsed.port || 6379);
  const clients = new ClientSet();
  const external = () => {
    throw new Error('restart() and kill() need a server the harness started: unset REDIS_URL');
  };
  return {
    source: 'env',
    url,
    host,
    port,
    client: (options = {}) => clients.add(new Redis(url, options)),
    stop: async () => clients.disconnectAll(),
    restart: async () => external(),
    kill: async () => external(),
  };
}

async function fromBinary(binary: string): Promise<RedisServer> {
  const dir = makeTempDir('redis');
  let server: RedisProcess | undefined;
  let lastError: unknown;
  for (let attempt = 0; attempt < START_ATTEMPTS && server === undefined; attempt++) {
    const candidate = new RedisProcess(binary, await freePort(), dir);
    try {
      await candidate.start();
      server = candidate;
    } catch (error) {
      lastError = error;
      // Someone took the port between the check and the start: try another.
      if (!candidate.output.includes('already in use')) break;
    }
  }
  if (server === undefined) {
    removeTempDir(dir);
    throw new Error(`could not start ${binary}`, { cause: lastError });
  }
  const started = server;
  const clients = new ClientSet();
  const port = started.port;
  return {
    source: 'process',
    url: `redis://${LOOPBACK}:${port}`,
    host: LOOPBACK,
    port,
    client: (options = {}) => clients.add(new Redis({ host: LOOPBACK, port, ...options })),
    stop: async () => {
      clients.disconnectAll();
      await started.stop();
      removeTempDir(dir);
    },
    restart: async () => {
      await started.stop();
      await started.start();
    },
    kill: () => started.stop('SIGKILL'),
  };
}

/** testcontainers path: untested on a machine without Docker; `restart()` may change the port. */
async function fromContainer(): Promise<RedisServer> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const container = await new GenericContainer(CONTAINER_IMAGE)
    .withExposedPorts(6379)
    .withCommand(['redis-server', '--save', '', '--appendonly', 'no'])
    .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
    .withStartupTimeout(60_000)
    .start();
  const clients = new ClientSet();
  const host = () => container.getHost();
  const port = () => container.getMappedPort(6379);
  return {
    source: 'container',
    get url() {
      return `redis://${host()}:${port()}`;
    },
    get host() {
      return host();
    },
    get port() {
      return port();
    },
    client: (options = {}) => clients.add(new Redis({ host: host(), port: port(), ...options })),
    stop: async () => {
      clients.disconnectAll();
      await container.stop({ timeout: 0 });
    },
    restart: () => container.restart(),
    kill: async () => {
      await container.stop({ timeout: 0, remove: false });
    },
  };
}

/**
 * `startRedis()` and one client of it made with `options`, ready for commands (`whenReady`): what
 * most test files need. The client is disconnected by the server's `stop()`.
 */
export async function startRedisWithClient(
  options: RedisOptions = {},
): Promise<{ server: RedisServer; redis: Redis }> {
  const server = await startRedis();
  const redis = server.client(options);
  await whenReady(redis);
  return { server, redis };
}
