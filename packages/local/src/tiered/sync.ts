import type { Clock, GlobalStore } from '@tiered-limiter/core';
import { OPS_PER_CALL, syncPeriodMs } from './fleet-options.js';
import { FleetRegistry } from './fleet-registry.js';
import { handBackExpiring, type Lease } from './lease.js';
import { owes } from './lease-reports.js';
import { covers, leaseWant, MIN_EXPECTED, QUIET_SHARE, QUIET_SPANS } from './lease-size.js';
import type { TieredConfig } from './options.js';
import type { Refiller } from './refiller.js';

/** Weight of the newest period in a key's rate estimate (an exponentially weighted average). */
const RATE_WEIGHT = 0.25;
/** Periods after its first sample that a key's rate is a plain mean over, before the moving average. */
const MEAN_PERIODS = 1 / RATE_WEIGHT;
/** How long a sync's round trip may take under load: what the grant it replaces keeps back for. */
const BRIDGE_MS = 20;
/** The longest a key seen once is taken to stay away: its demand is one request over this, at most. */
const ONE_REQUEST_MS = 1_000;
/**
 * The periodic sync of a two-tier limiter (issue 11's design): every period `T = instances ÷
 * (0.9 × fleetCallsPerSecond)` it sends, for every key that holds a lease, one op that hands back
 * what expired, reports what was spent, and leases what the key will need until just after the
 * next sync: its rate (the mean over its first four periods, then an EWMA) times `T + δ`, plus
 * three standard deviations of a Poisson count, capped by a fair share of the limit and a quarter
 * of what the bucket has left; a quiet key (`QUIET_SHARE`) is leased for two intervals and skipped
 * at the sync between. The store gathers these ops into a call per 32 keys, so a fleet
 * makes about `instances ÷ T` sync calls a second whatever its request rate, and leaves the rest
 * of its budget to the refills of keys that ran dry between syncs. Each sync also tells the store
 * this instance is alive and reads how many are: the period and the fair share follow the live
 * fleet.
 */
export class Syncer {
  readonly #config: TieredConfig;
  readonly #refiller: Refiller;
  readonly #store: GlobalStore;
  readonly #budget: number;
  /** This instance in the store's fleet registry: the live count, and whether it is within the declared one. */
  readonly fleet: FleetRegistry;
  #periodMs: number;
  /** The calls a round costs, as of the last one. */
  #calls = 1;
  /** How much longer than a period a grant lives: its overlap with the next one. */
  #slackMs = 0;
  /** How long the last round took, when it took longer than a period. */
  #roundMs = 0;

  constructor(
    config: TieredConfig,
    refiller: Refiller,
    store: GlobalStore,
    budget: number,
    instanceId: string,
    clock: Clock,
  ) {
    this.#config = config;
    this.#refiller = refiller;
    this.#store = store;
    this.#budget = budget;
    this.fleet = new FleetRegistry(store, instanceId, config.instances, clock);
    this.#periodMs = 0;
    this.#retime();
  }

  /** The sync period now, in ms. */
  get periodMs(): number {
    return this.#periodMs;
  }

  /** The fleet size in force: the live count the store reports, never below the declared one. */
  get instances(): number {
    return this.fleet.instances;
  }

  /**
   * Tells the store this instance is alive for three periods and reads the live count, at `nowMs`
   * (`FleetRegistry.beat`); the period and fair share follow a new count. Resolves the count when it
   * changed (for the `fleet` event), else `undefined`; never rejects.
   */
  async beat(nowMs: number, idle: boolean): Promise<number | undefined> {
    const live = await this.fleet.beat(nowMs, idle, 3 * this.#periodMs + 1000);
    if (live !== undefined) this.#retime();
    return live;
  }

  /**
   * Starts a round over the `candidates` keys that hold tokens or asked the store since the last
   * one: what a round over them all costs (a call per 32 ops, or the store's `opsPerCall`) sets
   * the period, so that an instance holding many keys keeps to its share of the budget. At a fixed
   * period one instance holding 1,000 keys made 32 calls every 20 ms, 1,600 a second against a
   * budget of 200. The candidates count, not only the keys leased: a key back every second never
   * got a lease at a 20 ms period, and with 100,000 such keys every request was a take.
   */
  round(candidates: number): void {
    const perCall = this.#store.opsPerCall ?? OPS_PER_CALL;
    const calls = Math.max(1, Math.ceil(candidates / perCall));
    if (calls === this.#calls) return;
    this.#calls = calls;
    this.#retime();
  }

  /** Ops the last call of a round over `candidates` keys has room for. */
  room(candidates: number): number {
    const perCall = this.#store.opsPerCall ?? OPS_PER_CALL;
    return Math.max(1, Math.ceil(candidates / perCall)) * perCall - candidates;
  }

  /**
   * The last round took `ms`: a key is synced again about a round later when rounds outlast the
   * period, and its grant must live until then.
   */
  roundTook(ms: number): void {
    const roundMs = ms > this.#periodMs ? Math.ceil(ms) : 0;
    if (roundMs === this.#roundMs) return;
    this.#roundMs = roundMs;
    this.#retime();
  }

  /**
   * Syncs `lease` at `nowMs` (its expired grants already moved to be handed back). Returns the
   * tokens it hands back early: what the grant it replaces still held, but for the bridge.
   */
  sync(lease: Lease, nowMs: number): number {
    const current = this.#rated(lease, nowMs);
    if (!current) {
      // A key new here, or back after the sync let it go: rated by this sample alone.
      lease.rate = this.#sample(lease, nowMs);
      // Its next few periods are rated by what it asked over all the time since, this sample
      // counted for the time it covered, at most a period. A moving average from one sample took
      // four periods to reach a steady rate; a mean of per-sync samples read a key first seen
      // 300 ms before a sync as asking a quarter of its rate (the sample spreads what it asked
      // over a period at least) and kept that for three periods: a fleet of 200 just started
      // refilled out of band for seconds. A key back after a long gap weighs its sample as one
      // period, as it did before.
      if (nowMs - lease.syncedAtMs <= this.#periodMs) {
        lease.rateFromMs = lease.syncedAtMs;
        lease.askedAtRateFrom = lease.askedAtSync;
      } else {
        lease.rateFromMs = nowMs - this.#periodMs;
        lease.askedAtRateFrom = lease.asked - lease.rate * this.#periodMs;
      }
    } else if (nowMs - lease.rateFromMs < MEAN_PERIODS * this.#periodMs) {
      lease.rate = this.#sample(lease, nowMs, lease.rateFromMs, lease.askedAtRateFrom);
    } else {
      lease.rate = RATE_WEIGHT * this.#sample(lease, nowMs) + (1 - RATE_WEIGHT) * lease.rate;
    }
    // What a request costs, over the period: a lease is sized in requests of that cost.
    const requests = lease.requests - lease.requestsAtSync;
    if (requests > 0) lease.meanCost = Math.max(1, (lease.asked - lease.askedAtSync) / requests);
    lease.requestsAtSync = lease.requests;
    lease.askedAtSync = lease.asked;
    lease.syncedAtMs = nowMs;
    const quiet = this.#quiet(lease, nowMs);
    // A quiet key's grant from the sync before still covers it until after the next: nothing to
    // send. What it owes (spends, and the few tokens the grant before kept to bridge the wait for
    // this one) rides with its next op, an interval later; until then it holds room in a bucket
    // the fleet is far from emptying.
    if (quiet && this.#covered(lease, nowMs)) return 0;
    // What the grant this sync replaces still holds goes back with it, but for what the key may
    // spend while the new grant is on its way: held tokens take the bucket's room, and a fleet
    // holding last period's leftovers too outgrows it. What the bridge keeps is held a period
    // more, so it is sized for a round trip under load, not the grant's whole overlap; a request
    // it does not cover waits for the sync in flight, which costs no call.
    const bridging = lease.rate * Math.min(this.#slackMs, BRIDGE_MS);
    const back = handBackExpiring(
      lease,
      nowMs + this.#periodMs,
      Math.round(bridging + 2 * Math.sqrt(bridging)),
    );
    const spans = quiet ? QUIET_SPANS : 1;
    const leasing = current || lease.grants.length > 0;
    const { timing } = this.#config;
    const batch = this.#refiller.batching.policy;
    const want = leaseWant(lease, nowMs, this.#periodMs, timing, batch, leasing, spans);
    if (want > 0 || owes(lease)) this.#refiller.sync(lease, want, spans);
    return back;
  }

  /**
   * Whether the fleet asks for `lease`'s key at most `QUIET_SHARE` of its refill rate, by this
   * instance's demand measured over a period at least: a key first seen shortly before a sync
   * reads slow, and a grant sized for that rate and held two intervals ran dry before the next.
   */
  #quiet(lease: Lease, nowMs: number): boolean {
    if (nowMs - lease.rateFromMs < this.#periodMs) return false;
    return this.#demand(lease, nowMs) * this.instances <= QUIET_SHARE * lease.limit.refillPerMs;
  }

  /**
   * Whether `lease` holds, in grants that outlive the next sync by half a fresh grant's overlap
   * (the rest allows for rounds that start a little early or late), what the key needs over a
   * grant's life.
   */
  #covered(lease: Lease, nowMs: number): boolean {
    return covers(lease, nowMs + this.#periodMs + this.#slackMs / 2, this.#config.timing.ttlMs);
  }

  /** Whether the fleet's demand for `lease`'s key reaches its refill rate: this instance's times the fleet. */
  atLimit(lease: Lease, nowMs: number): boolean {
    return this.#demand(lease, nowMs) * this.instances >= lease.limit.refillPerMs;
  }

  /**
   * This instance's demand for `lease`'s key, tokens per ms: the rate over the last syncs while
   * they are recent, else what was asked since the last one (a key the sync let go, back now).
   */
  #demand(lease: Lease, nowMs: number): number {
    return this.#rated(lease, nowMs) ? lease.rate : this.#sample(lease, nowMs);
  }

  /**
   * Whether `lease`'s rate is current: synced in the last two periods. A key the sync let go
   * keeps its last rate, below what the sync leases for; judged by it when it came back busy, it
   * was let go at every sync, and each of its requests was a take.
   */
  #rated(lease: Lease, nowMs: number): boolean {
    return lease.rate > 0 && nowMs - lease.syncedAtMs <= 2 * this.#periodMs;
  }

  /**
   * Tokens per ms asked since the last sync (or since `fromMs`, when `asked` was `askedFrom`), over
   * a period at least. A key never synced is measured from its first request, which only starts
   * the clock; a key seen once is taken to come back within a second at most. Counted as a
   * rate, one request 20 ms before a sync read as 50 a second, and 100,000 keys each seen once
   * got a lease each and a sync op every period until their rates decayed (13 Redis commands per
   * decision).
   */
  #sample(lease: Lease, nowMs: number, fromMs = lease.syncedAtMs, askedFrom = lease.askedAtSync): number {
    const elapsed = Math.max(nowMs - fromMs, this.#periodMs);
    if (askedFrom > 0 || lease.firstCost === 0) return (lease.asked - askedFrom) / elapsed;
    const after = lease.asked - lease.firstCost;
    return after > 0 ? after / elapsed : lease.asked / Math.max(elapsed, ONE_REQUEST_MS);
  }

  /**
   * Whether `lease` is worth syncing on: it holds tokens, owes reports, or has the demand a sync
   * leases for (`leaseWant`'s threshold: a lower one would drop a key the sync still serves, and its
   * next request would cost a take of its own). A key synced lately keeps the lower threshold of
   * a key that leases, so that a rate near it, measured over a few periods, does not flap.
   */
  keeps(lease: Lease, nowMs: number): boolean {
    if (lease.tokens > 0 || lease.grants.length > 0) return true;
    const threshold = this.#rated(lease, nowMs) ? MIN_EXPECTED / 2 : MIN_EXPECTED;
    return (this.#demand(lease, nowMs) * this.#config.timing.ttlMs) / lease.meanCost >= threshold;
  }

  /** The period, the lease's lifetime and the store's hold follow the fleet size and how long rounds take. */
  #retime(): void {
    this.#periodMs = syncPeriodMs(this.instances, this.#budget, this.#calls);
    this.#slackMs = Math.max(50, Math.ceil(this.#periodMs / 10));
    // A key is synced again a period later, or a round later when rounds outlast the period.
    const intervalMs = Math.max(this.#periodMs, this.#roundMs);
    const ttlMs = intervalMs + this.#slackMs;
    // An expired token is handed back with the next sync, up to an interval after it expired: the
    // store holds it an interval longer than it lives here, plus the grace for a stale clock.
    this.#config.timing.ttlMs = ttlMs;
    this.#config.timing.holdMs = ttlMs + intervalMs + this.#config.graceMs;
    // Leases may borrow one period of refill: the fleet's leases then fit a period's demand and
    // its spread beside the capacity, at `rate × T` on the bound (docs/ACCURACY.md).
    this.#config.timing.aheadMs = this.#periodMs;
    this.#config.timing.spanMs = intervalMs;
    this.#refiller.batching.competitors(this.instances, ttlMs);
  }
}
