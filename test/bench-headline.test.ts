import { describe, expect, it } from 'vitest';
import { IN_PROCESS_ONLY } from '../bench/src/keys.js';
import { headline } from '../bench/src/results.js';
import type { ThroughputRow } from '../bench/src/throughput.js';
import { relateToPeers } from '../bench/src/throughput-row.js';

// A ratio is read against the work each row did. At 1 per 10 s on 100,000 keys in turn the peer's
// warm-up pass outlasted its window, so its timed part admitted every request while the two-tier
// limiter's denied nearly all: the headline read "440×" with the peer's counts nowhere beside it.

/** A throughput row with what the headline reads; the rest left out. */
function row(
  limiter: string,
  set: ThroughputRow['keySet'],
  limit: string,
  opsPerSecond: number,
  allowed: number,
  denied: number,
): ThroughputRow {
  const name = (l: string) => `${l} · ${set} · ${limit}`;
  return {
    name: name(limiter),
    limiter,
    keys: 100_000,
    keySet: set,
    limit,
    ceiling: limit === 'ceiling',
    inFlight: 64,
    peer: name('RateLimiterRedis'),
    opsPerSecond,
    allowed,
    denied,
    roundTripsPer1000: 1,
    redisUsPerDecision: 0.2,
    redisCpuUsPerDecision: 0.2,
    keyOpsPerCall: 20,
    timesPeer: null,
  } as unknown as ThroughputRow;
}

function linesOf(section: 'throughput' | 'keys', rows: ThroughputRow[]): string[] {
  relateToPeers(rows);
  return headline({ [section]: rows }).filter((line) => line.startsWith('100k keys'));
}

describe('the headline’s many-keys ratios', () => {
  it('shows the peer’s counts beside the ratio, and says when its limit never bit', () => {
    const [line] = linesOf('throughput', [
      row('TieredLimiter', 'many', '1 per 10 s', 1_210_897, 84_430, 7_181_106),
      row('RequestLimiter', 'many', '1 per 10 s', 987_373, 100_000, 5_824_992),
      row('RateLimiterRedis', 'many', '1 per 10 s', 2_750, 24_576, 0),
    ]);
    expect(line).toContain('two-tier 440×');
    expect(line).toContain(
      "84,430 allowed, 7,181,106 denied; peer 24,576 allowed, 0 denied: the peer's limit never bit, not the same work",
    );
  });

  it('says when the limit bit neither row, and nothing more when both were limited', () => {
    const many = linesOf('keys', [
      row('TieredLimiter', 'many', '100 at 10/s', 1_057_336, 6_346_112, 0),
      row('RateLimiterRedis', 'many', '100 at 10/s', 118_356, 720_896, 0),
    ]);
    expect(many[0]).toContain(
      'peer 720,896 allowed, 0 denied: the limit bit neither, the admitting path alone',
    );
    const zipf = linesOf('keys', [
      row('TieredLimiter', 'zipf', '100 at 10/s', 909_184, 1_592_321, 3_902_975),
      row('RateLimiterRedis', 'zipf', '100 at 10/s', 165_940, 434_006, 576_682),
    ]);
    expect(zipf[0]).toMatch(/1,592,321 allowed, 3,902,975 denied; peer 434,006 allowed, 576,682 denied\)$/);
  });

  it('puts the in-process ceiling beside the two-tier ratios, and a dash where it did not run', () => {
    // Zipf rows at a limit that bites, a third of each row's decisions admitted.
    const zipfAt = (limiter: string, perSecond: number) =>
      row(limiter, 'zipf', '100 at 10/s', perSecond, perSecond, 2 * perSecond);
    const twoTierAndPeer = () => [zipfAt('TieredLimiter', 900_000), zipfAt('RateLimiterRedis', 100_000)];
    const [withCeiling] = linesOf('keys', [...twoTierAndPeer(), zipfAt(IN_PROCESS_ONLY, 1_800_000)]);
    expect(withCeiling).toContain('two-tier exact 9.00×');
    expect(withCeiling).toContain('in process and not shared (the ceiling) 18.0×');
    const [without] = linesOf('keys', twoTierAndPeer());
    expect(without).toContain('in process and not shared (the ceiling) —');
  });
});
