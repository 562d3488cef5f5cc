import {
  ArgumentError,
  CircuitOpenError,
  ClosedError,
  ConfigError,
  CostExceedsCapacityError,
  internal,
  StoreError,
  StoreReplyError,
  StoreTimeoutError,
  TieredLimiterError,
} from '@tiered-limiter/core';
import { describe, expect, it } from 'vitest';

const { assertInRange, assertInteger, assertOneOf, assertPositive } = internal;

describe('error classes', () => {
  const cause = new Error('ECONNRESET');
  const cases: readonly [TieredLimiterError, string, string][] = [
    [new TieredLimiterError('ERR_X', 'boom'), 'TieredLimiterError', 'ERR_X'],
    [new ConfigError('timeoutMs', -1, 'a number from 0 up'), 'ConfigError', 'ERR_TL_CONFIG'],
    [new ArgumentError('key', 1, 'a string'), 'ArgumentError', 'ERR_TL_ARGUMENT'],
    [new CostExceedsCapacityError(11, 10), 'CostExceedsCapacityError', 'ERR_TL_COST_EXCEEDS_CAPACITY'],
    [new StoreError('down', { cause }), 'StoreError', 'ERR_TL_STORE'],
    [new StoreReplyError('OOM', 'refused', { cause }), 'StoreReplyError', 'ERR_TL_STORE_REPLY'],
    [new StoreTimeoutError(20), 'StoreTimeoutError', 'ERR_TL_STORE_TIMEOUT'],
    [new CircuitOpenError(cause), 'CircuitOpenError', 'ERR_TL_CIRCUIT_OPEN'],
    [new ClosedError('TieredLimiter'), 'ClosedError', 'ERR_TL_CLOSED'],
  ];

  it.each(cases)('%s has its name, a stable code and the library prefix', (err, name, code) => {
    expect(err).toBeInstanceOf(Error);
    expect(err).toBeInstanceOf(TieredLimiterError);
    expect(err.name).toBe(name);
    expect(err.code).toBe(code);
    expect(err.message.startsWith('[tiered-limiter] ')).toBe(true);
  });

  it('keeps the cause of store failures', () => {
    expect(new StoreError('down', { cause }).cause).toBe(cause);
    expect(new CircuitOpenError(cause).cause).toBe(cause);
    expect(new StoreError('down', { code: 'ERR_TL_CUSTOM' }).code).toBe('ERR_TL_CUSTOM');
  });

  it('places the subclasses under the right parents', () => {
    expect(new CostExceedsCapacityError(2, 1)).toBeInstanceOf(ArgumentError);
    expect(new StoreTimeoutError(5)).toBeInstanceOf(StoreError);
    expect(new StoreReplyError('OOM', 'refused')).toBeInstanceOf(StoreError);
    expect(new StoreReplyError('OOM', 'refused', { cause }).cause).toBe(cause);
    expect(new StoreReplyError('OOM', 'refused').reply).toBe('OOM');
    expect(new CircuitOpenError()).toBeInstanceOf(StoreError);
    expect(new ConfigError('a', 1, 'b')).not.toBeInstanceOf(ArgumentError);
  });

  it('names the field and the value in the message', () => {
    const err = new ConfigError('timeoutMs', -1, 'a number from 0 up');
    expect(err.message).toBe('[tiered-limiter] Expected `timeoutMs` to be a number from 0 up, got -1');
    expect(err.option).toBe('timeoutMs');
    expect(err.value).toBe(-1);
    expect(new StoreTimeoutError(20).timeoutMs).toBe(20);
    expect(new StoreTimeoutError(20).message).toBe('[tiered-limiter] store call timed out after 20 ms');
    expect(new StoreTimeoutError(20).loopLateMs).toBe(0);
    const stalled = new StoreTimeoutError(20, 45.7);
    expect(stalled.loopLateMs).toBe(45);
    expect(stalled.message).toBe(
      "[tiered-limiter] store call timed out after 20 ms (this process's event loop ran the timer 45 ms late)",
    );
  });

  it.each([
    ['abc', '"abc"'],
    ['y'.repeat(61), 'a string of length 61'],
    [12.5, '12.5'],
    [5n, '5'],
    [false, 'false'],
    [null, 'null'],
    [undefined, 'undefined'],
    [[1, 2], 'an array of length 2'],
    [{ a: 1 }, 'a value of type object'],
    [() => 1, 'a value of type function'],
    [Symbol('s'), 'a value of type symbol'],
  ])('describes %s as %s without dumping it', (value, shown) => {
    expect(new ConfigError('x', value, 'y').message).toBe(
      `[tiered-limiter] Expected \`x\` to be y, got ${shown}`,
    );
  });
});

describe('validators', () => {
  it('assertInteger takes an inclusive range and says it', () => {
    expect(assertInteger('n', 0, 0, 5)).toBe(0);
    expect(assertInteger('n', 5, 0, 5)).toBe(5);
    expect(() => assertInteger('n', 6, 0, 5)).toThrowError(
      '[tiered-limiter] Expected `n` to be an integer from 0 to 5, got 6',
    );
    expect(() => assertInteger('n', -1, 0)).toThrowError('Expected `n` to be an integer from 0 up, got -1');
    expect(() => assertInteger('n', 0)).toThrowError('Expected `n` to be an integer from 1 up, got 0');
    expect(() => assertInteger('n', 2.5)).toThrowError(ConfigError);
  });

  it('assertPositive refuses 0, NaN, Infinity and values over the maximum', () => {
    expect(assertPositive('r', 0.001)).toBe(0.001);
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, '1']) {
      expect(() => assertPositive('r', bad)).toThrowError('Expected `r` to be a finite number above 0, got');
    }
    expect(() => assertPositive('r', 11, 10)).toThrowError(
      'Expected `r` to be a finite number above 0 and at most 10, got 11',
    );
  });

  it('assertInRange is inclusive at both ends', () => {
    expect(assertInRange('f', 0, 0, 1)).toBe(0);
    expect(assertInRange('f', 1, 0, 1)).toBe(1);
    expect(() => assertInRange('f', 1.01, 0, 1)).toThrowError(
      'Expected `f` to be a finite number from 0 to 1, got 1.01',
    );
    expect(() => assertInRange('f', Number.NaN, 0, 1)).toThrowError(ConfigError);
  });

  it('assertOneOf lists the allowed values', () => {
    expect(assertOneOf('policy', 'open', ['open', 'closed'])).toBe('open');
    expect(() => assertOneOf('policy', 'shut', ['open', 'closed'])).toThrowError(
      "Expected `policy` to be one of 'open', 'closed', got \"shut\"",
    );
    expect(() => assertOneOf('policy', 1, ['open'])).toThrowError(ConfigError);
  });
});
