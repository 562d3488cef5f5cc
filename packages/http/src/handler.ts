import { ConfigError } from '@tiered-limiter/core';

/**
 * An adapter's `handler` option, refused when the middleware is made unless it is a function:
 * otherwise a bad one would only throw on the first denial, in the middle of a request.
 * `expected` describes the framework's handler signature, for the error.
 */
export function handlerOption<Handler>(
  options: { readonly handler?: Handler } | undefined,
  expected: string,
): Handler | undefined {
  const handler = options?.handler;
  if (handler !== undefined && typeof handler !== 'function') {
    throw new ConfigError('handler', handler, expected);
  }
  return handler;
}
