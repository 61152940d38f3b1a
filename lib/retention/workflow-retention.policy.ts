/** Retention of one workflow's finished executions. */
export interface WorkflowRetention {
  name: string;
  retentionMs: number;
}

/** Says how long each known workflow's executions are kept; provided by the workflow engine. */
export abstract class WorkflowRetentionPolicy {
  abstract policies(): WorkflowRetention[];
  /** Called with the workflow ids whose executions cleanup removed, so no cache still answers for them. */
  abstract forget(workflowIds: string[]): Promise<void>;
}
