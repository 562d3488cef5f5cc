import {
  recommendedClusterOptions,
  recommendedNodeRedisClusterOptions,
  recommendedNodeRedisOptions,
  recommendedRedisOptions,
  recommendedValkeyClusterOptions,
  recommendedValkeyOptions,
} from '@tiered-limiter/redis';
import { Cluster as IoCluster, Redis as IoRedis } from 'ioredis';
import Valkey from 'iovalkey';
import { createClient, createCluster } from 'redis';
import { type Closable, closeClient, whenReady } from './clients.js';

/** The Redis client libraries `RedisStore` drives. */
export type ClientKind = 'ioredis' | 'iovalkey' | 'node-redis';

/** Every client kind, for `describe.each`. */
export const CLIENT_KINDS: readonly ClientKind[] = ['ioredis', 'iovalkey', 'node-redis'];

/** A connected client of one kind, made with that kind's recommended options. */
export interface KindClient {
  readonly kind: ClientKind;
  /** The client itself, for `RedisStore`'s `redis` option. */
  readonly client: object;
  /** Closes it at once; a second call does nothing. */
  close(): void;
}

/** Extra options, merged over the recommended ones (ioredis/iovalkey style, or node-redis style). */
export interface KindOptions {
  /** Connection name (`CLIENT SETNAME`), to find the client's connections on the server. */
  name?: string;
  /** Options replacing the recommended ones, in the client's own shape. */
  override?: Record<string, unknown>;
}

type Address = { readonly host: string; readonly port: number };

/** A client just made, of any kind. */
type Made = Closable & { on(event: 'error', listener: () => void): unknown; connect(): Promise<unknown> };

/**
 * `client` as a `KindClient`, once it can take commands. Its errors are heard first: a fault a test
 * makes would otherwise fail the run as an unheard `error` event. node-redis connects when told to;
 * ioredis and iovalkey connect on their own.
 */
async function ready(kind: ClientKind, client: Made): Promise<KindClient> {
  client.on('error', () => {});
  try {
    if (kind === 'node-redis') await client.connect();
    await whenReady(client);
  } catch (error) {
    // Not left reconnecting in the background: the caller never gets it to close.
    closeClient(client);
    throw error;
  }
  // Once: iovalkey's disconnect of a client already closed arms a 2 s timer to destroy a socket that
  // never closes again (21 such timers were left after a soak that closed clients twice).
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    closeClient(client);
  };
  return { kind, client, close };
}

/** A client of `kind` to one server, ready for commands. */
export function connectServer(kind: ClientKind, at: Address, options: KindOptions = {}): Promise<KindClient> {
  const { name, override = {} } = options;
  if (kind === 'node-redis') {
    const node = createClient({
      ...recommendedNodeRedisOptions,
      socket: { ...recommendedNodeRedisOptions.socket, host: at.host, port: at.port },
      ...(name === undefined ? {} : { name }),
      ...override,
    });
    return ready(kind, node);
  }
  const Redis = kind === 'ioredis' ? IoRedis : Valkey;
  const base = kind === 'ioredis' ? recommendedRedisOptions : recommendedValkeyOptions;
  return ready(kind, new Redis({ ...base, host: at.host, port: at.port, connectionName: name, ...override }));
}

/** A client of `kind` to a Cluster, ready for commands on every master. */
export function connectCluster(
  kind: ClientKind,
  nodes: readonly Address[],
  options: KindOptions = {},
): Promise<KindClient> {
  const { name, override = {} } = options;
  if (kind === 'node-redis') {
    const cluster = createCluster({
      ...recommendedNodeRedisClusterOptions,
      defaults: { ...recommendedNodeRedisClusterOptions.defaults, ...(name === undefined ? {} : { name }) },
      rootNodes: nodes.map(({ host, port }) => ({ socket: { host, port } })),
      ...override,
    });
    return ready(kind, cluster);
  }
  const base = kind === 'ioredis' ? recommendedClusterOptions : recommendedValkeyClusterOptions;
  const Cluster = kind === 'ioredis' ? IoCluster : Valkey.Cluster;
  const cluster = new Cluster(
    nodes.map(({ host, port }) => ({ host, port })),
    { ...base, redisOptions: { ...base.redisOptions, connectionName: name }, ...override },
  );
  return ready(kind, cluster);
}
