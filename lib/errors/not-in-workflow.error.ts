import { WorkflowError } from './workflow.error';

/**
 * `sleep`, `recv`, `setEvent`, `startChild` or `runChild` (or a child handle's `result()`) was called outside the
 * `run()` of a `@Workflow()` class, or inside a `@Step()` method: they are durable points of the workflow's journal,
 * so only the workflow function itself may call them.
 */
export class NotInWorkflowError extends WorkflowError {
  readonly code = 'NOT_IN_WORKFLOW';

  constructor(readonly call: string, readonly where: 'step' | 'outside') {
    super(where === 'step'
      ? `${call} was called inside a @Step() method: call it in the workflow's run() between steps (a step is retried on its own and must not wait or start workflows)`
      : `${call} was called outside a workflow: call it in run() of a @Workflow() class while a workflow worker runs it (use WorkflowClient.send/getEvent/start from other code)`);
    this.name = 'NotInWorkflowError';
  }
}
