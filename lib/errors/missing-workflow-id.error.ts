import { WorkflowError } from './workflow.error';

/** A workflow with `identity: 'caller_provided'` was started without a `workflowId`. */
export class MissingWorkflowIdError extends WorkflowError {
  readonly code = 'MISSING_WORKFLOW_ID';

  constructor(readonly workflow: string) {
    super(`workflow "${workflow}" uses identity "caller_provided": pass { workflowId } to WorkflowClient.start()`);
    this.name = 'MissingWorkflowIdError';
  }
}
