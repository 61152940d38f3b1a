import { Injectable } from '@nestjs/common';
import { AsyncLocalStorage } from 'node:async_hooks';
import { WorkflowError } from '../errors/workflow.error';
import type { StepContext } from './workflow.interfaces';

/** @internal The step context of the step running in this async call chain. */
export const stepStorage = new AsyncLocalStorage<StepContext>();

/** `currentStep()` was called outside a running `@Step()` method. */
export class NotInStepError extends WorkflowError {
  readonly code = 'NOT_IN_STEP';

  constructor() {
    super('currentStep() was called outside a @Step() method run by a workflow worker');
    this.name = 'NotInStepError';
  }
}

/**
 * The context of the running step: execution and workflow ids, step name and position, attempt, and a
 * stable idempotency key (the same on every attempt) to pass to external APIs. Throws outside a step.
 */
export function currentStep(): StepContext {
  const context = stepStorage.getStore();
  if (!context) throw new NotInStepError();
  return context;
}

/** Injectable access to the running step's context, for code that prefers DI over `currentStep()`. */
@Injectable()
export class StepContextAccessor {
  /** The running step's context, or undefined outside a step. */
  get current(): StepContext | undefined {
    return stepStorage.getStore();
  }
}
