// A consumer's ES module: loads the packages with import(), as an ESM application does.
// Run by the dist test inside the consumer project: node consumer.mjs <report.json>
import { writeFileSync } from 'node:fs';
import { exerciseAll } from './exercises.mjs';

const report = await exerciseAll((name) => import(name), {
  redisUrl: process.env.REDIS_URL,
  prefix: process.env.TL_PREFIX,
});
writeFileSync(process.argv[2], JSON.stringify(report));
