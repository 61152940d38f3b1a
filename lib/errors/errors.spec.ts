import { HttpException } from '@nestjs/common';
import * as api from '../index';
import { IDEMPOTENCY_PROBLEMS, type IdempotencyProblemType } from '../http/problem-details';

type ErrorClass = new (...args: never[]) => Error;
const stored = { name: 'Error', message: 'boom' };

/**
 * One sample instance per public error class. A new exported error class must be added here, so that the
 * checks below (shared base class, stable unique code) cover it.
 */
const SAMPLES: Record<string, () => Error[]> = {
  IdempotencyConfigError: () => [new api.IdempotencyConfigError(['x: bad'])],
  IdempotencySchemaError: () => [new api.IdempotencySchemaError('public', ['m1'])],
  StoreUnavailableError: () => [new api.StoreUnavailableError(new Error('down'))],
  DuplicateExecutionError: () => [new api.DuplicateExecutionError('k', 'in_progress')],
  IdempotencyKeyReusedError: () => [new api.IdempotencyKeyReusedError('k')],
  StoredFailureError: () => [new api.StoredFailureError('k', 'Error', 'boom')],
  ResultNotStoredError: () => [new api.ResultNotStoredError('k')],
  KeyDerivationError: () => [new api.KeyDerivationError('A.b', 'why')],
  NotInStepError: () => [new api.NotInStepError()],
  NotInTransactionError: () => [new api.NotInTransactionError()],
  LeaseLostError: () => [new api.LeaseLostError('k')],
  WorkflowDefinitionError: () => [new api.WorkflowDefinitionError(['x'])],
  WorkflowConflictError: () => [new api.WorkflowConflictError('w', 'e', 'with another input')],
  WorkflowExistsError: () => [new api.WorkflowExistsError('w', 'e', 'running')],
  MissingWorkflowIdError: () => [new api.MissingWorkflowIdError('w')],
  DeterminismError: () => [new api.DeterminismError('e', 0, 'a', 'b')],
  WorkflowTimeoutError: () => [new api.WorkflowTimeoutError('e')],
  WorkflowCancelledError: () => [new api.WorkflowCancelledError('e')],
  WorkflowFailedError: () => [new api.WorkflowFailedError('e', stored)],
  RecoveryAttemptsExhaustedError: () => [new api.RecoveryAttemptsExhaustedError('e', stored)],
  StepFailedError: () => [new api.StepFailedError('s', 0, 1, stored)],
  StepTimeoutError: () => [new api.StepTimeoutError('s', 10)],
  WorkflowNotFoundError: () => [new api.WorkflowNotFoundError('gone')],
  WorkflowResultTimeoutError: () => [new api.WorkflowResultTimeoutError('e', 'running', 10)],
  IdempotencyProblemException: () =>
    (Object.keys(IDEMPOTENCY_PROBLEMS) as IdempotencyProblemType[]).map((type) => new api.IdempotencyProblemException(type, 'detail')),
};

const errorClasses = Object.entries(api as Record<string, unknown>).filter(
  (entry): entry is [string, ErrorClass] => typeof entry[1] === 'function' && (entry[1] as ErrorClass).prototype instanceof Error,
);
const abstractBases = new Set(['IdempotencyError', 'WorkflowError']);

describe('public errors', () => {
  it('every exported Error subclass has a sample here (add new error classes to SAMPLES)', () => {
    const concrete = errorClasses.map(([name]) => name).filter((name) => !abstractBases.has(name));
    expect(concrete.sort()).toEqual(Object.keys(SAMPLES).sort());
  });

  it.each(Object.keys(SAMPLES))('%s is an IdempotencyError (or an HttpException) with a stable code', (name) => {
    const Class = (api as unknown as Record<string, ErrorClass>)[name];
    for (const error of SAMPLES[name]()) {
      expect(error).toBeInstanceOf(Class);
      expect(error instanceof api.IdempotencyError || error instanceof HttpException).toBe(true);
      expect(error.name === name || error instanceof HttpException).toBe(true);
      const code = (error as { code?: unknown }).code;
      expect(typeof code).toBe('string');
      expect(code).toMatch(/^[A-Z][A-Z0-9_]+$/);
    }
  });

  it('no two error classes (or problem kinds) share a code', () => {
    const codes = Object.values(SAMPLES).flatMap((make) => make().map((e) => (e as unknown as { code: string }).code));
    expect(new Set(codes).size).toBe(codes.length);
  });

  it('only HTTP problems extend HttpException; everything else extends IdempotencyError', () => {
    for (const [name, make] of Object.entries(SAMPLES)) {
      for (const error of make()) expect([name, error instanceof HttpException]).toEqual([name, name === 'IdempotencyProblemException']);
    }
  });

  it('option errors of workflows are IdempotencyConfigError, and an exhausted recovery is a WorkflowFailedError', () => {
    expect(new api.WorkflowDefinitionError(['x'])).toBeInstanceOf(api.IdempotencyConfigError);
    expect(new api.RecoveryAttemptsExhaustedError('e', stored)).toBeInstanceOf(api.WorkflowFailedError);
  });
});
