import { type Clock, ConfigError, internal } from '@tiered-limiter/core';
import { DEFAULT_COOLDOWN_MS, DEFAULT_FAILURE_THRESHOLD, DEFAULT_TIMEOUT_MS } from '../defaults.js';
import type { StoreGuardOptions } from './guard-types.js';

const { assertClock, assertInteger, assertKnownOptions } = internal;

/** `StoreGuardOptions` checked, with their defaults. */
export interface GuardSettings {
  readonly timeoutMs: number;
  /** `false` when `breaker: false`: every call is tried, none refused. */
  readonly breakerEnabled: boolean;
  readonly failureThreshold: number;
  readonly cooldownMs: number;
  readonly clock: Clock;
}

/** Checks a guard's options, throwing a `ConfigError` naming the first bad one. */
export function resolveGuardOptions(options: StoreGuardOptions): GuardSettings {
  assertKnownOptions('', options, ['timeoutMs', 'breaker', 'clock']);
  const timeoutMs = assertInteger('timeoutMs', options.timeoutMs ?? DEFAULT_TIMEOUT_MS, 1, 60_000);
  const breaker = options.breaker ?? {};
  if (breaker !== false && (breaker === null || typeof breaker !== 'object' || Array.isArray(breaker))) {
    throw new ConfigError('breaker', breaker, 'an object or false');
  }
  const b = breaker === false ? {} : breaker;
  assertKnownOptions('breaker', b, ['failureThreshold', 'cooldownMs']);
  return {
    timeoutMs,
    breakerEnabled: breaker !== false,
    failureThreshold: assertInteger(
      'breaker.failureThreshold',
      b.failureThreshold ?? DEFAULT_FAILURE_THRESHOLD,
      1,
      1000,
    ),
    cooldownMs: assertInteger('breaker.cooldownMs', b.cooldownMs ?? DEFAULT_COOLDOWN_MS, 1, 600_000),
    clock: options.clock === undefined ? performance : assertClock('clock', options.clock),
  };
}
