// A consumer's CommonJS module: loads the packages with require(), as a CommonJS application
// does. Run by the dist test inside the consumer project: node consumer.cjs <report.json>
const { writeFileSync } = require('node:fs');

(async () => {
  const { exerciseAll } = await import('./exercises.mjs');
  const report = await exerciseAll((name) => require(name), {
    redisUrl: process.env.REDIS_URL,
    prefix: process.env.TL_PREFIX,
  });
  writeFileSync(process.argv[2], JSON.stringify(report));
})().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
