import { MemoryStore } from '@tiered-limiter/local';
import { RedisStore } from '@tiered-limiter/redis';
import {
  CLIENT_KINDS,
  connectCluster,
  connectServer,
  type KindClient,
  type RedisCluster,
  type RedisServer,
  startCluster,
  startRedis,
  uniquePrefix,
} from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import type { RedisClientType, RedisClusterType } from 'redis';
import { afterAll, beforeAll, expect } from 'vitest';
import { rawCommandAdapter } from './src/raw-adapter.js';
import { describeStoreContract } from './src/store-contract.js';

let server: RedisServer | undefined;
let cluster: RedisCluster | undefined;
const clients: KindClient[] = [];

beforeAll(async () => {
  [server, cluster] = await Promise.all([startRedis(), startCluster({ masters: 3 })]);
});

afterAll(async () => {
  for (const client of clients.splice(0)) client.close();
  await Promise.all([server?.stop(), cluster?.stop()]);
});

describeStoreContract('MemoryStore', () => new MemoryStore());

for (const kind of CLIENT_KINDS) {
  describeStoreContract(`RedisStore (${kind}) on one Redis server`, async () => {
    const client = await connectServer(kind, server!);
    clients.push(client);
    return new RedisStore({ redis: client.client, prefix: uniquePrefix('contract') });
  });

  describeStoreContract(`RedisStore (${kind}) on a Redis Cluster of 3 masters`, async () => {
    const client = await connectCluster(kind, cluster!.nodes);
    clients.push(client);
    return new RedisStore({ redis: client.client, prefix: uniquePrefix('contract') });
  });
}

// node-redis v5 speaks RESP2 unless told `RESP: 3`, where a script's replies come back typed anew
// (a Lua `true` as a boolean, not 1): the store must read them the same.
describeStoreContract('RedisStore (node-redis, RESP3) on one Redis server', async () => {
  const client = await connectServer('node-redis', server!, { override: { RESP: 3 } });
  clients.push(client);
  expect(await (client.client as RedisClientType).sendCommand(['CLIENT', 'INFO'])).toMatch(/ resp=3\b/);
  return new RedisStore({ redis: client.client, prefix: uniquePrefix('contract') });
});

describeStoreContract('RedisStore (node-redis, RESP3) on a Redis Cluster of 3 masters', async () => {
  const client = await connectCluster('node-redis', cluster!.nodes, { override: { RESP: 3 } });
  clients.push(client);
  const info = (client.client as RedisClusterType).sendCommand(undefined, true, ['CLIENT', 'INFO']);
  expect(await info).toMatch(/ resp=3\b/);
  return new RedisStore({ redis: client.client, prefix: uniquePrefix('contract') });
});

// A service sharing its Redis often gives its client a `keyPrefix`: ioredis then prefixes every key
// of every command, the script's KEYS and a reset's DEL alike, and a Cluster client reckons slots on
// the prefixed key, whose hash tag is still the store's.
describeStoreContract('RedisStore (ioredis with a keyPrefix) on one Redis server', async () => {
  const client = await connectServer('ioredis', server!, { override: { keyPrefix: 'app:' } });
  clients.push(client);
  return new RedisStore({ redis: client.client, prefix: uniquePrefix('contract') });
});

describeStoreContract('RedisStore (ioredis with a keyPrefix) on a Redis Cluster of 3 masters', async () => {
  const client = await connectCluster('ioredis', cluster!.nodes, { override: { keyPrefix: 'app:' } });
  clients.push(client);
  return new RedisStore({ redis: client.client, prefix: uniquePrefix('contract') });
});

describeStoreContract('RedisStore (ioredis) on a Redis Cluster of 3 masters, 12 virtual shards', async () => {
  const client = await connectCluster('ioredis', cluster!.nodes);
  clients.push(client);
  return new RedisStore({ redis: client.client, prefix: uniquePrefix('contract'), shards: 12 });
});

describeStoreContract('RedisStore (ioredis) on one Redis server, not coalescing', async () => {
  const client = await connectServer('ioredis', server!);
  clients.push(client);
  return new RedisStore({ redis: client.client, prefix: uniquePrefix('contract'), coalesce: false });
});

describeStoreContract(
  'RedisStore (a hand-written RedisClientAdapter of raw commands) on one Redis server',
  async () => {
    const client = await connectServer('ioredis', server!);
    clients.push(client);
    const adapter = rawCommandAdapter(client.client as Redis);
    return new RedisStore({ redis: adapter, prefix: uniquePrefix('contract') });
  },
);
