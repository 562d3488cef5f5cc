import { STATUS_CODES } from 'node:http';
import { ConfigError, type Decision } from '@tiered-limiter/core';
import { PROBLEM_CONTENT_TYPE } from './defaults.js';

/**
 * A problem document (RFC 9457), the body of a denial, sent as `application/problem+json`.
 * Members beyond the standard five are allowed (extension members).
 */
export interface ProblemDocument {
  /** A URI naming the problem type. `about:blank` means "just the status code". */
  type?: string;
  /** A short summary of the problem type. */
  title?: string;
  /** The HTTP status code, repeated for the reader of a body alone. */
  status?: number;
  /** This occurrence, for people. */
  detail?: string;
  /** A URI naming this occurrence. */
  instance?: string;
  /** Extension members. */
  [member: string]: unknown;
}

/** What a `problem` or `message` function is told about the denial it writes a body for. */
export interface Denial {
  /** The limiter's decision. */
  readonly decision: Decision;
  /** The status the answer carries: `statusCode`, or `failClosedStatus` for a `closed`-policy denial. */
  readonly status: number;
  /** The `Retry-After` value, in whole seconds. */
  readonly retryAfterSeconds: number;
}

/**
 * The body of a denial: a problem document, a partial one laid over the default (to set your
 * own `type` URI, say), or a function that writes the whole document.
 */
export type ProblemOption = Partial<ProblemDocument> | ((denial: Denial) => ProblemDocument);

/**
 * The default body of a denial: `about:blank` with the status's title and a sentence saying
 * when to retry. A `closed`-policy denial does not say why the limiter is unavailable: a
 * client has no use for that, and an attacker would. The title is the status's reason phrase, as
 * RFC 9457 §4.2.1 asks of `about:blank` (`Forbidden` for a `statusCode` of 403), and is left out
 * for a status with none.
 *
 * @example
 * defaultProblem({ decision, status: 429, retryAfterSeconds: 2 });
 * // { type: 'about:blank', title: 'Too Many Requests', status: 429, detail: 'Too many requests; retry in 2 s.' }
 */
export function defaultProblem(denial: Denial): ProblemDocument {
  const unavailable = denial.status === 503;
  return {
    type: 'about:blank',
    title: STATUS_CODES[denial.status],
    status: denial.status,
    detail: unavailable
      ? `This route is unavailable for a moment; retry in ${denial.retryAfterSeconds} s.`
      : `Too many requests; retry in ${denial.retryAfterSeconds} s.`,
  };
}

/** The options that shape a denial's body. */
export interface DenialBody<Req> {
  readonly message: string | object | ((req: Req, denial: Denial) => string | object) | undefined;
  readonly problem: ProblemOption | undefined;
}

/**
 * A denial's body and media type: `message` when given (a string as `text/plain`, anything else
 * as JSON), else the problem document by `problem`.
 */
export function denialBody<Req>(
  options: DenialBody<Req>,
  req: Req,
  denial: Denial,
): { body: string; contentType: string } {
  const { message, problem } = options;
  if (message !== undefined) {
    const value = typeof message === 'function' ? message(req, denial) : message;
    return typeof value === 'string'
      ? { body: value, contentType: 'text/plain; charset=utf-8' }
      : { body: JSON.stringify(bodyObject('message', value)), contentType: 'application/json' };
  }
  if (typeof problem === 'function')
    return {
      body: JSON.stringify(bodyObject('problem', problem(denial))),
      contentType: PROBLEM_CONTENT_TYPE,
    };
  const base = defaultProblem(denial);
  return {
    body: JSON.stringify(problem === undefined ? base : { ...base, ...problem }),
    contentType: PROBLEM_CONTENT_TYPE,
  };
}

/**
 * What a `message` or `problem` function answered, if it is an object a body can be written from.
 * A promise was written as `{}` (an async function is not awaited), and `undefined` as no body at
 * all, a `TypeError` from deep inside the response that named neither option.
 */
function bodyObject(option: string, value: unknown): object {
  if (value === null || typeof value !== 'object' || value instanceof Promise) {
    throw new ConfigError(
      option,
      value,
      'a function answering a string or an object, at once (not a promise)',
    );
  }
  return value;
}
