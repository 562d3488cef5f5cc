import { ArgumentError, MAX_CAPACITY } from '@tiered-limiter/core';

/** Checks the token count of `reward` and `penalty`: a whole number from 1 up. */
export function assertTokens(tokens: unknown): number {
  if (typeof tokens !== 'number' || !Number.isInteger(tokens) || tokens < 1 || tokens > MAX_CAPACITY) {
    throw new ArgumentError('tokens', tokens, `an integer from 1 to ${MAX_CAPACITY}`);
  }
  return tokens;
}
