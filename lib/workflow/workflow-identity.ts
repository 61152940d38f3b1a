import { fingerprint } from '../core/fingerprint';
import { MissingWorkflowIdError } from '../errors/missing-workflow-id.error';
import type { WorkflowIdentity } from './workflow.interfaces';
import { uuidv7 } from './uuidv7';

/** The hash stored with an execution: workflow name + canonical input. Same id with another hash is a conflict. */
export function inputHash(workflowName: string, canonicalInput: string): string {
  return fingerprint([workflowName, canonicalInput]);
}

/**
 * The workflow id of a start: an explicit id always wins; otherwise `strict` derives it from the workflow name and
 * the canonical input, `always_unique` draws a UUIDv7, and `caller_provided` refuses with MissingWorkflowIdError.
 */
export function resolveWorkflowId(workflowName: string, identity: WorkflowIdentity, hash: string, explicit?: string): string {
  if (explicit !== undefined) {
    if (typeof explicit !== 'string' || explicit.length === 0 || explicit.length > 255) {
      throw new TypeError(`workflowId must be a string of 1 to 255 characters, got ${JSON.stringify(explicit)}`);
    }
    return explicit;
  }
  switch (identity) {
    case 'caller_provided':
      throw new MissingWorkflowIdError(workflowName);
    case 'always_unique':
      return uuidv7();
    default:
      return `${workflowName}:${hash}`;
  }
}
