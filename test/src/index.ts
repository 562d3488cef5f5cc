export type { ClientKind, KindClient, KindOptions } from './client-kinds.js';
export { CLIENT_KINDS, connectCluster, connectServer } from './client-kinds.js';
export type { Closable } from './clients.js';
export { ClientSet, closeClient, whenReady } from './clients.js';
export type { CommandDelta, CommandStat, CommandStats } from './commandstats.js';
export { commandDelta, parseCommandStats, ROUND_TRIP_COMMANDS, readCommandStats } from './commandstats.js';
export type { ExampleService, ExampleServiceOptions, ServiceReply } from './example-service.js';
export { startExampleService } from './example-service.js';
export { FakeClock } from './fake-clock.js';
export type { SoakServer } from './fault-soak.js';
export { SOAK_KEYS, serverFault } from './fault-soak.js';
export type { FleetOrders, FleetReport, RunFleetOptions } from './fleet.js';
export { runFleet, syncPeriodOf } from './fleet.js';
export type { DecidingLimiter } from './limits-still.js';
export { decide, proveStillLimits } from './limits-still.js';
export type {
  OptionCase,
  OptionKind,
  OptionTable,
  Outcome,
  Pick,
  Subject,
  VitestApi,
} from './option-matrix.js';
export {
  BAD_VALUES,
  CaseCount,
  expectNamed,
  mustRefuse,
  nest,
  optionMatrix,
  optionTests,
  show,
  tryCombination,
  tryEveryValue,
  tryOption,
  tryWholeOptions,
  valuesOf,
  withOption,
} from './option-matrix.js';
export type { LimiterFactory } from './option-tables.js';
export {
  acquireOptions,
  httpOptions,
  limitOptions,
  localLimiterOptions,
  memoryStoreOptions,
  rateOptions,
  redisLimiterOptions,
  redisStoreOptions,
  redisTieredLimiterOptions,
  requestLimiterOptions,
  storeLimiterOptions,
  TINY,
  tieredLimiterOptions,
} from './option-tables.js';
export { ProcessReports } from './process-reports.js';
export type { RedisProcessOptions } from './processes.js';
export { findBinary, freePort, LOOPBACK, portIsFree, RedisProcess } from './processes.js';
export { sleepAtLeast, sleepUntil, stopwatch, waitUntil } from './real-time.js';
export { msUntilStoreAnswers, type StoreBackedLimiter } from './redis-answers.js';
export type { ClusterNode, ClusterStartOptions, RedisCluster } from './redis-cluster.js';
export { replicaInSync, startCluster } from './redis-cluster.js';
export type { Address, RedisSentinel, SentinelStartOptions } from './redis-sentinel.js';
export { startSentinel } from './redis-sentinel.js';
export type { RedisServer, RedisSource } from './redis-server.js';
export { startRedis, startRedisWithClient } from './redis-server.js';
export type { RedisTargets } from './redis-targets.js';
export { startRedisTargets } from './redis-targets.js';
export type { ScenarioInstance, ScenarioReport, ScenarioStep } from './scenario.js';
export { runScenario } from './scenario.js';
export { seededRandom } from './seeded-random.js';
export { parseServerCpuSeconds, readServerCpuSeconds } from './server-cpu.js';
export type { SoakConfig, SoakRunOptions, SoakSettings } from './soak-run.js';
export { runSoak, SOAK_LIMITS, soakSettings } from './soak-run.js';
export type { StoreCall, StoreMode } from './store-doubles.js';
export { LosableStore, ScriptedStore } from './store-doubles.js';
export type { CutOutcome } from './store-ops.js';
export { destroySocket, storeOps, takeWhileCutting } from './store-ops.js';
export type { TcpProxy } from './tcp-proxy.js';
export { startTcpProxy } from './tcp-proxy.js';
export { tokensTaken } from './tokens-taken.js';
export { uniquePrefix } from './unique-prefix.js';
// window-bound.ts is the kit's window arithmetic for tests and benches alike: all of it is kit API.
export * from './window-bound.js';
