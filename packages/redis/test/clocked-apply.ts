import { SCRIPTS } from '../src/scripts.js';

/**
 * `apply.lua` with its clock read from `clockKey` (µs) instead of Redis's TIME: the tests drive
 * the arithmetic to the µs, which Redis's own clock would not let them.
 */
export function clockedApply(clockKey: string): string {
  const clocked = SCRIPTS.apply.replace(
    'local now = tonumber(time[1]) * 1000000 + tonumber(time[2])',
    `local now = tonumber(redis.call('GET', '${clockKey}'))`,
  );
  // A script that no longer reads TIME so would test Redis's clock, not the one set here.
  if (clocked === SCRIPTS.apply)
    throw new Error('apply.lua no longer reads its clock as clockedApply expects');
  return clocked;
}
