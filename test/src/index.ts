export { ClientSet, whenReady } from './clients.js';
export type { CommandDelta, CommandStat, CommandStats } from './commandstats.js';
export { commandDelta, parseCommandStats, ROUND_TRIP_COMMANDS, readCommandStats } from './commandstats.js';
export { FakeClock } from './fake-clock.js';
export type { FleetOrders, FleetReport, RunFleetOptions } from './fleet.js';
export { runFleet } from './fleet.js';
export { findBinary, freePort, LOOPBACK, portIsFree, RedisProcess } from './processes.js';
export { sleepAtLeast, sleepUntil, stopwatch } from './real-time.js';
export type { ClusterNode, ClusterStartOptions, RedisCluster } from './redis-cluster.js';
export { startCluster } from './redis-cluster.js';
export type { RedisServer, RedisSource } from './redis-server.js';
export { startRedis } from './redis-server.js';
export type { ScenarioInstance, ScenarioReport, ScenarioStep } from './scenario.js';
export { runScenario } from './scenario.js';
export { uniquePrefix } from './unique-prefix.js';
export type {
  Admission,
  OptimisticTerms,
  WindowBound,
  WindowCheckOptions,
  WorstWindow,
} from './window-bound.js';
export {
  mostInWindow,
  optimisticBound,
  tokenBucketBound,
  WINDOW_EPSILON,
  worstWindow,
} from './window-bound.js';
