import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { ClientSet } from './clients.js';
import {
  findBinary,
  freePort,
  LOOPBACK,
  makeTempDir,
  RedisProcess,
  removeTempDir,
  SERVER_START_TIMEOUT_MS,
} from './processes.js';
import { waitUntil } from './real-time.js';
import { replicaInSync } from './redis-cluster.js';

/** A host and port on loopback. */
export interface Address {
  readonly host: string;
  readonly port: number;
}

/** A Sentinel-managed master with one replica and three Sentinels, from `startSentinel()`. */
export interface RedisSentinel {
  /** The name the Sentinels monitor the master under. */
  readonly masterName: string;
  /** The three Sentinels. */
  readonly sentinels: readonly Address[];
  /** The two data nodes: the first master, then its replica. */
  readonly dataNodes: readonly Address[];
  /** The master the Sentinels name now (`SENTINEL GET-MASTER-ADDR-BY-NAME`, first Sentinel that answers). */
  master(): Promise<Address>;
  /** A new ioredis client of the master through the Sentinels (`sentinels`, `name` set), disconnected by `stop()`. */
  client(options?: RedisOptions): Redis;
  /** A new plain ioredis client of one node or Sentinel, disconnected by `stop()`. */
  nodeClient(at: Address, options?: RedisOptions): Redis;
  /** SIGKILLs the data node at `at`; `restart(at)` starts it again, empty, as a master. */
  kill(at: Address): Promise<void>;
  /** Starts the data node at `at` again (the Sentinels then make it a replica of the master). */
  restart(at: Address): Promise<void>;
  /** Disconnects every client made here and stops every process. */
  stop(): Promise<void>;
}

/** Options of `startSentinel`. */
export interface SentinelStartOptions {
  /**
   * `down-after-milliseconds`: how long the master must be unreachable before a Sentinel
   * thinks it down. @default 1000
   */
  downAfterMs?: number;
}

const MASTER_NAME = 'tl-master';
const QUORUM = 2;

/**
 * Starts a Sentinel topology from the `redis-server` binary alone: a master, one replica
 * (`--replicaof`), and three `redis-server <conf> --sentinel` processes monitoring the master
 * with a quorum of 2, every process on its own free loopback port and directory. Resolves once
 * the replica is in sync and each Sentinel knows the replica and the two other Sentinels, so a
 * failover can start as soon as the master goes. The Sentinels exchange hellos and INFO faster
 * than by default (`SENTINEL DEBUG`), so a failover takes about `downAfterMs` + 1 s.
 *
 * @example
 * const topology = await startSentinel();
 * const redis = topology.client(recommendedSentinelOptions);
 * await topology.kill(await topology.master()); // the replica is promoted
 */
export async function startSentinel(options: SentinelStartOptions = {}): Promise<RedisSentinel> {
  const downAfterMs = options.downAfterMs ?? 1000;
  const server = findBinary('redis-server');
  if (!server) throw new Error('startSentinel needs `redis-server` on PATH (apt-get install redis-server)');
  const dir = makeTempDir('sentinel');
  const clients = new ClientSet();
  const processes = new Map<number, RedisProcess>();
  const stop = async () => {
    clients.disconnectAll();
    await Promise.all([...processes.values()].map((p) => p.stop()));
    removeTempDir(dir);
  };
  const node = (port: number, args: string[] = [], configFile?: string, readyLine?: string) => {
    const nodeDir = join(dir, String(port));
    mkdirSync(nodeDir);
    const p = new RedisProcess(server, port, nodeDir, args, {
      configFile: configFile?.replace('<dir>', nodeDir),
      readyLine,
    });
    processes.set(port, p);
    return p;
  };
  try {
    const [masterPort, replicaPort, ...sentinelPorts] = await distinctPorts(5);
    const fastSync = ['--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'];
    await node(masterPort!, fastSync).start();
    await node(replicaPort!, [...fastSync, '--replicaof', LOOPBACK, String(masterPort)]).start();
    const dataNodes = [masterPort!, replicaPort!].map((port) => ({ host: LOOPBACK, port }));
    const sentinels = sentinelPorts.map((port) => ({ host: LOOPBACK, port }));
    for (const { port } of sentinels) {
      const conf = join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        conf,
        [
          `sentinel monitor ${MASTER_NAME} ${LOOPBACK} ${masterPort} ${QUORUM}`,
          `sentinel down-after-milliseconds ${MASTER_NAME} ${downAfterMs}`,
          `sentinel failover-timeout ${MASTER_NAME} 10000`,
          `sentinel parallel-syncs ${MASTER_NAME} 1`,
          '',
        ].join('\n'),
      );
      await node(port, ['--sentinel'], conf, 'Sentinel ID is').start();
    }
    const nodeClient = (at: Address, redisOptions: RedisOptions = {}) =>
      clients.add(new Redis({ host: at.host, port: at.port, ...redisOptions }));
    for (const at of sentinels) {
      // Hellos every 250 ms and INFO every second: the Sentinels find each other in about a
      // second and see a promotion at once, instead of within 2 and 10 s.
      await nodeClient(at).call('SENTINEL', 'DEBUG', 'publish-period', '250', 'info-period', '1000');
    }
    await waitFor('the replica in sync', () => replicaInSync(nodeClient(dataNodes[1]!)));
    for (const at of sentinels) {
      const sentinel = nodeClient(at);
      await waitFor(`Sentinel ${at.port} to know its peers and the replica`, async () => {
        const peers = (await sentinel.call('SENTINEL', 'SENTINELS', MASTER_NAME)) as unknown[];
        const replicas = (await sentinel.call('SENTINEL', 'REPLICAS', MASTER_NAME)) as unknown[];
        return peers.length === sentinels.length - 1 && replicas.length === 1;
      });
      sentinel.disconnect();
    }
    const master = async (): Promise<Address> => {
      for (const at of sentinels) {
        const sentinel = nodeClient(at, { maxRetriesPerRequest: 0, retryStrategy: () => null });
        try {
          const [host, port] = (await sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as [
            string,
            string,
          ];
          return { host, port: Number(port) };
        } catch {
          // try the next Sentinel
        } finally {
          sentinel.disconnect();
        }
      }
      throw new Error('no Sentinel answered');
    };
    const processAt = (at: Address) => {
      const p = processes.get(at.port);
      if (!p) throw new Error(`no data node on port ${at.port}`);
      return p;
    };
    return {
      masterName: MASTER_NAME,
      sentinels,
      dataNodes,
      master,
      client: (redisOptions = {}) =>
        clients.add(new Redis({ ...redisOptions, sentinels: [...sentinels], name: MASTER_NAME })),
      nodeClient,
      kill: (at) => processAt(at).stop('SIGKILL'),
      restart: (at) => processAt(at).start(),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function distinctPorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

function waitFor(what: string, check: () => Promise<boolean>): Promise<void> {
  return waitUntil(`startSentinel: ${what}`, check, SERVER_START_TIMEOUT_MS);
}
