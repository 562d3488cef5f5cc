import { runFleet } from './fleet/run-fleet.js';

const url = 'redis://127.0.0.1:6379';
const prefix = `t3${process.pid}`;
const base = {
  url,
  prefix,
  key: 'shared',
  tier: 'tiered' as const,
  capacity: 100,
  refillPerSecond: 200,
  instances: 4,
  durationMs: 3000,
  maxDecisions: 50_000_000,
  lease: { ttlMs: 1000 },
};
const reports = await runFleet([1, 2, 3, 4].map(() => base));
for (const r of reports) console.log(r.admittedAt.length, r.decisions, JSON.stringify(r.stats));
console.log(
  'total',
  reports.reduce((s, r) => s + r.admittedAt.length, 0),
);
