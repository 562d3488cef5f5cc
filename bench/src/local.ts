import { perSecond } from '@tiered-limiter/core';
import { LocalLimiter } from '@tiered-limiter/local';
import type { AddTask } from './suite.js';
import { sink } from './suite.js';

const KEYS = 100_000;

/**
 * `LocalLimiter` on one hot key and on 100,000 keys in turn. The limit (a billion a second)
 * admits every call, so both rows time the admitting path, the one a healthy service runs.
 */
export function registerLocal(add: AddTask): void {
  const limits = perSecond(1_000_000_000);

  const hot = new LocalLimiter({ limits });
  add('LocalLimiter · 1 hot key', () => {
    sink.value = hot.tryConsume('user:1');
  });

  const many = new LocalLimiter({ limits, maxKeys: KEYS });
  const keys = Array.from({ length: KEYS }, (_, i) => `user:${i}`);
  let next = 0;
  add('LocalLimiter · 100k keys', () => {
    sink.value = many.tryConsume(keys[next]!);
    next = next + 1 === KEYS ? 0 : next + 1;
  });
}
