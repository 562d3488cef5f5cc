import { ConfigError, internal } from '@tiered-limiter/core';
import { DEFAULT_READY_TIMEOUT_MS } from './defaults.js';

/** An ioredis or iovalkey `Redis` or `Cluster`, as far as readiness goes. */
interface IoredisReadiness {
  readonly status: string;
  once(event: 'ready' | 'end', listener: () => void): unknown;
  off(event: 'ready' | 'end', listener: () => void): unknown;
  nodes?(role: 'master'): { ping(): Promise<unknown> }[];
  /** A Cluster's read of its slots, which also opens a pool entry again for a master whose connection ended. */
  refreshSlotsCache?(callback: (error?: Error | null) => void): void;
}

/** A node-redis client (`isReady`) or cluster (`isOpen` once `connect()` resolved). */
interface NodeRedisReadiness {
  readonly isOpen: boolean;
  readonly isReady?: boolean;
}

const POLL_MS = 10;

/** Node's longest timer: a longer one (`Infinity` included) fires after 1 ms instead. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Resolves once `client` can take commands, which the recommended options need (with no offline
 * queue, a command sent before then fails at once and the limiter decides by its policy); rejects
 * if it ends, or is not ready within `timeoutMs`.
 * - ioredis / iovalkey `Redis`: its `ready` event (now, if it is ready already);
 * - ioredis / iovalkey `Cluster`: ready, and a connection open to every master (they open lazily,
 *   and a command for a master whose connection is still opening would fail): a PING to each, again
 *   after one fails, all within `timeoutMs`;
 * - node-redis client, cluster or Sentinel client: `isReady` (a client, a Sentinel client) or
 *   `isOpen` (a cluster), after your `connect()`.
 *
 * @example
 * import { Redis } from 'ioredis';
 * import { recommendedRedisOptions, whenReady } from '@tiered-limiter/redis';
 *
 * const redis = new Redis({ ...recommendedRedisOptions, host: '127.0.0.1', port: 6379 });
 * await whenReady(redis);
 */
export async function whenReady(client: object, timeoutMs = DEFAULT_READY_TIMEOUT_MS): Promise<void> {
  // Unchecked, `Infinity` (or anything past Node's longest timer) gave up after 1 ms, and NaN at once.
  internal.assertInteger('timeoutMs', timeoutMs, 1, MAX_TIMER_MS);
  if (client !== null && typeof client === 'object' && 'status' in client && 'once' in client) {
    const io = client as IoredisReadiness;
    const deadline = performance.now() + timeoutMs;
    await statusReady(io, timeoutMs);
    if (typeof io.nodes === 'function') await mastersAnswer(io, deadline, timeoutMs);
    return;
  }
  if (client !== null && typeof client === 'object' && 'isOpen' in client) {
    return pollReady(client as NodeRedisReadiness, timeoutMs);
  }
  throw new ConfigError(
    'client',
    client,
    'an ioredis or iovalkey Redis or Cluster, or a node-redis client, cluster or Sentinel client',
  );
}

/** The wait before another round of PINGs to a Cluster's masters after one failed, doubling to the most. */
const PING_AGAIN_MS = 50;
const PING_AGAIN_MOST_MS = 1000;

/**
 * Resolves once every master of `cluster` answered a PING in one round (which opens the connections
 * the Cluster opens lazily). A round that failed, a connection a fault dropped, is tried again, 50 ms
 * later and doubling to 1 s, once the slot table is read anew: ioredis takes a master whose connection ended out of its pool, and
 * the next round, on the masters left, answered without it. Rejects at `deadline`, or once the client
 * has ended. One PING a master, unbounded, held `whenReady(client, 300)` for 1,569 ms behind a
 * master paused for 1.5 s, and as long as a frozen master stayed frozen; and one dropped connection
 * failed it at once.
 */
async function mastersAnswer(cluster: IoredisReadiness, deadline: number, timeoutMs: number): Promise<void> {
  let failure = '';
  for (let againMs = PING_AGAIN_MS; ; againMs = Math.min(2 * againMs, PING_AGAIN_MOST_MS)) {
    if (cluster.status === 'end') throw new Error('the client ended before it was ready');
    const leftMs = deadline - performance.now();
    if (leftMs <= 0) break;
    const round = Promise.all(cluster.nodes!('master').map((node) => node.ping()));
    const outcome = await within(round, leftMs);
    if (outcome === true) return;
    if (outcome === false) break;
    failure = `: ${outcome.message}`;
    // Each read of the slots opens a connection: a master down for the whole wait costs a dozen, not 200.
    const pause = new Promise((resolve) => setTimeout(resolve, againMs));
    const refreshed = new Promise<void>((resolve) => {
      if (cluster.refreshSlotsCache === undefined) resolve();
      else cluster.refreshSlotsCache(() => resolve());
    });
    await within(Promise.all([pause, refreshed]), Math.max(0, deadline - performance.now()));
  }
  throw new Error(`client not ready in ${timeoutMs} ms: a Cluster master did not answer PING${failure}`);
}

/** `true` once `round` resolves, its error if it rejects, `false` if `ms` pass first. */
function within(round: Promise<unknown>, ms: number): Promise<boolean | Error> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    round.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      (error: unknown) => {
        clearTimeout(timer);
        resolve(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

/** The waits on one client still connecting, and the one pair of listeners of ours that ends them. */
interface ReadyFanout {
  readonly waits: Set<(error?: Error) => void>;
  readonly onReady: () => void;
  readonly onEnd: () => void;
}

const fanouts = new WeakMap<IoredisReadiness, ReadyFanout>();

/**
 * However many callers wait on one client, it carries a single `ready` and a single `end` listener
 * of ours, gone with the last wait: 11 callers (limiters made at start-up, each awaiting the shared
 * client) made Node warn of a leak on the application's client when each added its own.
 */
function statusReady(client: IoredisReadiness, timeoutMs: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  if (client.status === 'end') return Promise.reject(new Error('the client has ended'));
  return new Promise<void>((resolve, reject) => {
    let fanout = fanouts.get(client);
    if (fanout === undefined) {
      const waits = new Set<(error?: Error) => void>();
      const settle = (error?: Error) => {
        stop(client, fanout!);
        for (const done of [...waits]) done(error);
      };
      fanout = {
        waits,
        onReady: () => settle(),
        onEnd: () => settle(new Error('the client ended before it was ready')),
      };
      fanouts.set(client, fanout);
      client.once('ready', fanout.onReady);
      client.once('end', fanout.onEnd);
    }
    const { waits } = fanout;
    const done = (error?: Error) => {
      clearTimeout(timer);
      waits.delete(done);
      if (waits.size === 0 && fanouts.get(client) === fanout) stop(client, fanout);
      if (error) reject(error);
      else resolve();
    };
    const timer = setTimeout(() => done(new Error(`client not ready in ${timeoutMs} ms`)), timeoutMs);
    waits.add(done);
  });
}

/** Takes `fanout`'s listeners off `client`. */
function stop(client: IoredisReadiness, fanout: ReadyFanout): void {
  fanouts.delete(client);
  client.off('ready', fanout.onReady);
  client.off('end', fanout.onEnd);
}

async function pollReady(client: NodeRedisReadiness, timeoutMs: number): Promise<void> {
  const ready = () => client.isReady ?? client.isOpen;
  const deadline = performance.now() + timeoutMs;
  while (!ready()) {
    if (performance.now() >= deadline)
      throw new Error(`client not ready in ${timeoutMs} ms (call connect() first)`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}
