import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { ClientSet } from './clients.js';
import {
  findBinary,
  LOOPBACK,
  makeTempDir,
  portIsFree,
  RedisProcess,
  removeTempDir,
  SERVER_START_TIMEOUT_MS,
} from './processes.js';
import { waitUntil } from './real-time.js';

/** One master of a test cluster. */
export interface ClusterNode {
  readonly host: string;
  readonly port: number;
  /** The node's cluster id (`CLUSTER MYID`). */
  readonly id: string;
}

/** A real Redis Cluster for tests, from `startCluster()`. */
export interface RedisCluster {
  /** The masters as the cluster was made (a failover may since have made one a replica). */
  readonly nodes: readonly ClusterNode[];
  /** The replicas as the cluster was made, `replicas` per master. */
  readonly replicas: readonly ClusterNode[];
  /** A new ioredis `Cluster` over all the nodes, disconnected by `stop()`. */
  cluster(options?: ClusterOptions): Cluster;
  /** A new plain ioredis client of one node (for `CLUSTER …` commands), disconnected by `stop()`. */
  nodeClient(node: ClusterNode, options?: RedisOptions): Redis;
  /** SIGKILLs the node at `node`'s port: a replica of it takes its slots after `nodeTimeoutMs` and an election. */
  kill(node: ClusterNode): Promise<void>;
  /** Disconnects every client made here and stops every node. */
  stop(): Promise<void>;
}

/** Options of `startCluster`. */
export interface ClusterStartOptions {
  /** Masters, each holding a third (or so) of the slots. @default 3 */
  masters?: number;
  /** Replicas per master, in sync before `startCluster` resolves (for failover tests). @default 0 */
  replicas?: number;
  /**
   * `cluster-node-timeout`: how long a node may be unreachable before the others fail it over.
   * @default 5000
   */
  nodeTimeoutMs?: number;
}

const run = promisify(execFile);
const PORT_ATTEMPTS = 200;
/** Client ports are drawn from here, so that each bus port (port + 10000) stays below 65536. */
const PORT_RANGE = { from: 10_000, to: 40_000 };
const CLUSTER_CREATE_TIMEOUT_MS = 60_000;

/**
 * Starts a real Redis Cluster on loopback: `masters` `redis-server --cluster-enabled yes`
 * processes on free ports (each with its bus port, port + 10000, also free), joined with
 * `redis-cli --cluster create … --cluster-replicas <replicas> --cluster-yes`, and resolves once every node
 * reports `cluster_state:ok` and knows every other. Needs `redis-server` and `redis-cli` on PATH.
 * Call `stop()` in `afterAll`; a process exit kills whatever is left.
 *
 * @example
 * let cluster: RedisCluster;
 * beforeAll(async () => { cluster = await startCluster({ masters: 3 }); });
 * afterAll(() => cluster.stop());
 */
export async function startCluster(options: ClusterStartOptions = {}): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 0;
  if (!Number.isInteger(replicas) || replicas < 0 || replicas > 2) {
    throw new Error(`startCluster: expected \`replicas\` to be 0, 1 or 2, got ${replicas}`);
  }
  const total = masters * (1 + replicas);
  if (!Number.isInteger(masters) || masters < 3) {
    throw new Error(`startCluster: expected \`masters\` to be an integer from 3 up, got ${masters}`);
  }
  const server = findBinary('redis-server');
  const cli = findBinary('redis-cli');
  if (!server || !cli) {
    throw new Error(
      'startCluster needs `redis-server` and `redis-cli` on PATH ' +
        '(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis).',
    );
  }
  const dir = makeTempDir('cluster');
  const processes: RedisProcess[] = [];
  const clients = new ClientSet();
  const stop = async () => {
    clients.disconnectAll();
    await Promise.all(processes.map((p) => p.stop()));
    removeTempDir(dir);
  };
  try {
    const ports = await clusterPorts(total);
    for (const port of ports) {
      const nodeDir = join(dir, String(port));
      mkdirSync(nodeDir);
      processes.push(
        new RedisProcess(server, port, nodeDir, [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--cluster-node-timeout',
          String(options.nodeTimeoutMs ?? 5000),
        ]),
      );
    }
    await Promise.all(processes.map((p) => p.start()));
    await run(
      cli,
      [
        '--cluster',
        'create',
        ...ports.map((port) => `${LOOPBACK}:${port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      { timeout: CLUSTER_CREATE_TIMEOUT_MS },
    );
    const nodes: ClusterNode[] = [];
    const replicaNodes: ClusterNode[] = [];
    for (const port of ports) {
      const admin = clients.add(new Redis({ host: LOOPBACK, port }));
      await waitForClusterOk(admin, total);
      const node = { host: LOOPBACK, port, id: String(await admin.call('CLUSTER', 'MYID')) };
      const role = String(((await admin.call('ROLE')) as unknown[])[0]);
      if (role === 'master') nodes.push(node);
      else {
        await waitForSync(admin);
        replicaNodes.push(node);
      }
      admin.disconnect();
    }
    return {
      nodes,
      replicas: replicaNodes,
      cluster: (clusterOptions = {}) =>
        clients.add(
          new Cluster(
            nodes.map(({ host, port }) => ({ host, port })),
            clusterOptions,
          ),
        ),
      nodeClient: (node, redisOptions = {}) =>
        clients.add(new Redis({ host: node.host, port: node.port, ...redisOptions })),
      kill: async (node) => {
        const p = processes.find((candidate) => candidate.port === node.port);
        if (!p) throw new Error(`no cluster node on port ${node.port}`);
        await p.stop('SIGKILL');
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Loopback ports `p` with `p` and its bus port `p + 10000` both free, all distinct. */
async function clusterPorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let attempt = 0; attempt < PORT_ATTEMPTS && ports.length < count; attempt++) {
    const port = PORT_RANGE.from + Math.floor(Math.random() * (PORT_RANGE.to - PORT_RANGE.from));
    const taken = ports.some((p) => Math.abs(p - port) === 10_000 || p === port);
    if (!taken && (await portIsFree(port)) && (await portIsFree(port + 10_000))) ports.push(port);
  }
  if (ports.length < count) throw new Error(`found only ${ports.length} of ${count} free cluster ports`);
  return ports;
}

async function waitForClusterOk(admin: Redis, known: number): Promise<void> {
  await waitUntil(
    `cluster_state:ok with ${known} known nodes`,
    async () => {
      const info = String(await admin.call('CLUSTER', 'INFO'));
      return info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${known}\r`);
    },
    SERVER_START_TIMEOUT_MS,
  );
}

async function waitForSync(replica: Redis): Promise<void> {
  await waitUntil('the replica in sync', () => replicaInSync(replica), SERVER_START_TIMEOUT_MS);
}

/** Whether `replica`'s link to its master is up (INFO replication). */
export async function replicaInSync(replica: Redis): Promise<boolean> {
  return (await replica.info('replication')).includes('master_link_status:up');
}
