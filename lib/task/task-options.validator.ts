import { parseDuration } from '../utils/duration';
import { nearestKey } from '../utils/known-keys';
import { CheckedStepOptions, checkStepOptions } from '../workflow/workflow-definition.validator';
import type { WorkflowIdentity } from '../workflow/workflow.interfaces';
import { DEFAULT_TASK_QUEUE } from './task.constants';
import type { TaskOptions } from './task.interfaces';

const TASK_KEYS = ['name', 'queue', 'attempts', 'backoff', 'timeout', 'identity', 'retention', 'transaction', 'isolation'];
const IDENTITIES: WorkflowIdentity[] = ['strict', 'caller_provided', 'always_unique'];

/** Validated `@Task()` options. */
export interface CheckedTaskOptions {
  name: string;
  identity: WorkflowIdentity;
  retentionMs?: number;
  /** What runs it: the step options (name, queue, attempts, backoff, timeout, transaction). */
  step: CheckedStepOptions;
}

/** Checks `@Task()` options (the step-like ones as `@Step()` does); problems are appended to `problems`. */
export function checkTaskOptions(options: TaskOptions, method: string, where: string, problems: string[]): CheckedTaskOptions {
  for (const key of Object.keys(options)) {
    if (TASK_KEYS.includes(key)) continue;
    const guess = nearestKey(key, TASK_KEYS);
    problems.push(`${where}: unknown option "${key}"; ${guess === undefined ? '' : `did you mean ${guess}? `}(the options are ${TASK_KEYS.join(', ')})`);
  }
  const { identity, retention, ...rest } = options;
  // Unknown keys are reported above, once, with the task's options: the step check sees only the ones it shares.
  const stepOptions = Object.fromEntries(Object.entries(rest).filter(([key]) => TASK_KEYS.includes(key))) as typeof rest;
  const step = checkStepOptions({ ...stepOptions, queue: rest.queue ?? DEFAULT_TASK_QUEUE }, method, where, problems);
  let checkedIdentity: WorkflowIdentity = 'strict';
  if (identity !== undefined) {
    if (IDENTITIES.includes(identity)) checkedIdentity = identity;
    else problems.push(`${where}: identity must be one of ${IDENTITIES.join(', ')}, got ${JSON.stringify(identity)}`);
  }
  let retentionMs: number | undefined;
  if (retention !== undefined) {
    const parsed = parseDuration(retention);
    if (typeof parsed === 'number' && parsed >= 0) retentionMs = parsed;
    else problems.push(`${where}: retention: ${typeof parsed === 'number' ? 'must not be negative' : parsed.error}`);
  }
  return { name: step.name, identity: checkedIdentity, retentionMs, step };
}
