import type { Attributes, Meter } from '@opentelemetry/api';
import { ConfigError, internal } from '@tiered-limiter/core';

const { assertKnownOptions, assertObject } = internal;

/**
 * Checks a function's options object (absent is `{}`) and that it names only `known` options:
 * a misspelt `attribute` was ignored, and every data point lost the attributes that tell
 * limiters apart.
 */
export function assertOptions<T extends object>(options: unknown, known: readonly string[]): T {
  if (options === undefined) return {} as T;
  const checked = assertObject<T>('options', options);
  assertKnownOptions('', checked, known);
  return checked;
}

/**
 * Checks `attributes`: an object of OpenTelemetry attribute values (a string, number or boolean,
 * or an array of them). A string was spread into `{ 0: … }` on every data point.
 */
export function assertAttributes(value: unknown): Attributes {
  if (value === undefined || value === null) return {};
  const attributes = assertObject<Record<string, unknown>>('attributes', value);
  for (const [key, item] of Object.entries(attributes)) {
    const ok = Array.isArray(item) ? item.every(isAttributeScalar) : isAttributeScalar(item);
    if (!ok) {
      throw new ConfigError(
        `attributes.${key}`,
        item,
        'a string, number or boolean, or an array of them (an OpenTelemetry attribute value)',
      );
    }
  }
  return attributes as Attributes;
}

function isAttributeScalar(value: unknown): boolean {
  return (
    value === null ||
    value === undefined ||
    typeof value === 'string' ||
    typeof value === 'boolean' ||
    (typeof value === 'number' && Number.isFinite(value))
  );
}

/**
 * Checks that `meter` has the methods the caller will use, so that a missing meter fails here,
 * naming it, rather than as a TypeError (or, for observable instruments, at the SDK's first
 * collection, where the error is only logged).
 */
export function assertMeter(meter: unknown, methods: readonly string[]): Meter {
  const m = meter as Record<string, unknown> | null;
  if (m === null || typeof m !== 'object' || methods.some((name) => typeof m[name] !== 'function')) {
    throw new ConfigError('meter', meter, `an OpenTelemetry Meter (with ${methods.join(', ')})`);
  }
  return meter as Meter;
}
