import { HttpException } from '@nestjs/common';
import * as api from '../index';
import { IDEMPOTENCY_PROBLEMS, type IdempotencyProblemType } from '../http/problem-details';

type ErrorClass = new (...args: unknown[]) => Error;

/**
 * A stand-in for any constructor argument (a string, an array of problems, a stored error, a cause), so that every
 * exported error class can be built here without a hand-written sample: new classes are covered as they are exported.
 */
const anything: unknown = new Proxy(function anything() {}, {
  get: (_target, property) => {
    if (property === Symbol.toPrimitive) return () => 'x';
    if (property === Symbol.iterator) return function* empty() {};
    if (property === 'then') return undefined;
    return anything;
  },
  apply: () => anything,
});

/** Classes whose instances differ by argument in a way that matters here: one instance per problem kind. */
const SAMPLES: Record<string, () => Error[]> = {
  IdempotencyProblemException: () =>
    (Object.keys(IDEMPOTENCY_PROBLEMS) as IdempotencyProblemType[]).map((type) => new api.IdempotencyProblemException(type, 'detail')),
};

const ABSTRACT_BASES = new Set(['IdempotencyError', 'WorkflowError']);

const errorClasses = Object.entries(api as Record<string, unknown>).filter(
  (entry): entry is [string, ErrorClass] =>
    typeof entry[1] === 'function' && (entry[1] as ErrorClass).prototype instanceof Error && !ABSTRACT_BASES.has(entry[0]),
);

function instancesOf(name: string, Class: ErrorClass): Error[] {
  return SAMPLES[name]?.() ?? [new Class(anything, anything, anything, anything, anything, anything)];
}

describe('public errors (every Error subclass exported by lib/index.ts)', () => {
  it('finds the exported error classes', () => {
    expect(errorClasses.map(([name]) => name)).toEqual(expect.arrayContaining(['IdempotencyConfigError', 'StoreUnavailableError', 'RecoveryAttemptsExhaustedError', 'IdempotencyProblemException']));
  });

  it.each(errorClasses)('%s extends IdempotencyError (HTTP problems: HttpException) and has a stable code', (name, Class) => {
    for (const error of instancesOf(name, Class)) {
      expect(error).toBeInstanceOf(Class);
      // Only the HTTP problems extend HttpException; everything else extends IdempotencyError.
      expect([name, error instanceof api.IdempotencyError, error instanceof HttpException]).toEqual([name, name !== 'IdempotencyProblemException', name === 'IdempotencyProblemException']);
      if (!(error instanceof HttpException)) expect(error.name).toBe(name);
      expect((error as { code?: unknown }).code).toEqual(expect.stringMatching(/^[A-Z][A-Z0-9_]+$/));
    }
  });

  it('no two error classes (or problem kinds) share a code', () => {
    const codes = errorClasses.flatMap(([name, Class]) => instancesOf(name, Class).map((e) => `${(e as unknown as { code: string }).code}`));
    expect(codes.filter((code, i) => codes.indexOf(code) !== i)).toEqual([]);
  });

  it('an HTTP problem\'s message is its detail, so an app\'s exception filter can show it', () => {
    const problem = new api.IdempotencyProblemException('missing-key', 'this endpoint requires the idempotency-key header');
    expect([problem.message, problem.code]).toEqual(['this endpoint requires the idempotency-key header', 'HTTP_MISSING_KEY']);
  });

  it('option errors of workflows are IdempotencyConfigError, and an exhausted recovery is a WorkflowFailedError', () => {
    expect(new api.WorkflowDefinitionError(['x'])).toBeInstanceOf(api.IdempotencyConfigError);
    expect(new api.RecoveryAttemptsExhaustedError('e', { name: 'Error', message: 'boom' })).toBeInstanceOf(api.WorkflowFailedError);
  });
});
