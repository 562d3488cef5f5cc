import { allowDecision, type Decision } from '@tiered-limiter/core';
import type { AddTask } from './suite.js';
import { sink } from './suite.js';

const ALWAYS: Decision = allowDecision(1, 0, 1, 'local');

/** What a call costs with no limiter at all: the floor every other row stands on. */
function noLimiter(_key: string, _cost = 1): Decision {
  return ALWAYS;
}

/** The rows every other row is read against: no limiter, and the clock read a limiter makes. */
export function registerBaseline(add: AddTask): void {
  add('baseline · no limiter', () => {
    sink.value = noLimiter('user:1');
  });
  add('performance.now() alone', () => {
    sink.value = performance.now();
  });
}
