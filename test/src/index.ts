export { ClientSet, whenReady } from './clients.js';
export { FakeClock } from './fake-clock.js';
export { findBinary, freePort, LOOPBACK, portIsFree, RedisProcess } from './processes.js';
export { sleepAtLeast, sleepUntil, stopwatch } from './real-time.js';
export type { ClusterNode, ClusterStartOptions, RedisCluster } from './redis-cluster.js';
export { startCluster } from './redis-cluster.js';
export type { RedisServer, RedisSource } from './redis-server.js';
export { startRedis } from './redis-server.js';
export { uniquePrefix } from './unique-prefix.js';
