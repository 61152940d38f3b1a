import type { TraceCarrier } from '../observability/idempotency-observer';
import type { StepJobData } from '../workflow/step-job';
import { stepArgsHash } from '../workflow/step-args-hash';
import { workflowJobId, WorkflowQueues } from '../workflow/workflow-queues';
import type { RegisteredTask } from './task.registry';

/** The stored execution a task job runs. */
export interface TaskExecutionRef {
  executionId: string;
  taskId: string;
  args: unknown[];
}

/**
 * @internal Adds the BullMQ job of a task execution to the task's queue: job id `wf-<execution id>` (deterministic: a
 * retried add is a no-op while the job lives, and a `result()` waiter hears its completion), the task's attempts and
 * backoff as BullMQ's. The job is the execution's only step, at position 0; the step worker runs it. The one place
 * that creates task jobs (a queue's settings hook in here).
 */
export async function addTaskJob(queues: WorkflowQueues, task: RegisteredTask, execution: TaskExecutionRef, delayMs?: number, trace?: TraceCarrier): Promise<void> {
  const { step } = task;
  const data: StepJobData = {
    executionId: execution.executionId,
    workflowId: execution.taskId,
    workflowName: task.name,
    owner: task.name,
    step: step.name,
    position: 0,
    args: execution.args,
    argsHash: stepArgsHash(execution.args),
    task: true,
    ...(trace ? { trace } : {}),
  };
  await queues.queue(step.queue).add(task.name, data, {
    jobId: workflowJobId(execution.executionId),
    attempts: step.attempts,
    ...(step.backoff === undefined ? {} : { backoff: step.backoff }),
    ...(delayMs ? { delay: delayMs } : {}),
    removeOnComplete: true,
    removeOnFail: true,
  });
}
