import { resolveTransactionSetting, TransactionSetting } from '../transaction/transaction-options';
import { parseDuration } from '../utils/duration';
import { nearestKey } from '../utils/known-keys';
import { DEFAULT_STEP_QUEUE, DEFAULT_WORKFLOW_QUEUE } from './workflow.constants';
import type { StepBackoff, StepOptions, WorkflowIdentity, WorkflowOptions } from './workflow.interfaces';

const WORKFLOW_KEYS = ['name', 'queue', 'identity', 'timeout', 'retention'];
const STEP_KEYS = ['name', 'attempts', 'backoff', 'timeout', 'queue', 'transaction', 'isolation'];
const IDENTITIES: WorkflowIdentity[] = ['strict', 'caller_provided', 'always_unique'];
const QUEUE_NAME = /^[\w.-]{1,100}$/;

/** Validated `@Workflow()` options (without steps). */
export interface CheckedWorkflowOptions {
  name: string;
  queue: string;
  identity: WorkflowIdentity;
  timeoutMs?: number;
  retentionMs?: number;
}

/** Validated `@Step()` options. */
export interface CheckedStepOptions {
  name: string;
  attempts: number;
  backoff?: StepBackoff;
  timeoutMs?: number;
  queue: string;
  transaction: TransactionSetting;
}

function name(value: unknown, fallback: string, where: string, problems: string[]): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || value.trim().length === 0 || value.length > 200) {
    problems.push(`${where}: name must be a non-empty string of at most 200 characters, got ${JSON.stringify(value)}`);
    return fallback;
  }
  return value;
}

function queue(value: unknown, fallback: string, where: string, problems: string[]): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !QUEUE_NAME.test(value)) {
    problems.push(`${where}: queue must be 1 to 100 letters, digits, "_", "-" or ".", got ${JSON.stringify(value)}`);
    return fallback;
  }
  return value;
}

function duration(value: unknown, where: string, option: string, problems: string[], { allowZero = false } = {}): number | undefined {
  if (value === undefined) return undefined;
  const parsed = parseDuration(value);
  if (typeof parsed !== 'number') {
    problems.push(`${where}: ${option}: ${parsed.error}`);
    return undefined;
  }
  if (parsed < 0 || (parsed === 0 && !allowZero)) {
    problems.push(`${where}: ${option} must be greater than zero`);
    return undefined;
  }
  return parsed;
}

function unknownKeys(options: object, known: string[], where: string, problems: string[]): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const guess = nearestKey(key, known);
    problems.push(`${where}: unknown option "${key}"; ${guess === undefined ? '' : `did you mean ${guess}? `}(the options are ${known.join(', ')})`);
  }
}

/** Checks `@Workflow()` options; problems are appended to `problems`. */
export function checkWorkflowOptions(options: WorkflowOptions, className: string, problems: string[]): CheckedWorkflowOptions {
  const where = `@Workflow() on ${className}`;
  unknownKeys(options, WORKFLOW_KEYS, where, problems);
  let identity: WorkflowIdentity = 'strict';
  if (options.identity !== undefined) {
    if (IDENTITIES.includes(options.identity)) identity = options.identity;
    else problems.push(`${where}: identity must be one of ${IDENTITIES.join(', ')}, got ${JSON.stringify(options.identity)}`);
  }
  return {
    name: name(options.name, className, where, problems),
    queue: queue(options.queue, DEFAULT_WORKFLOW_QUEUE, where, problems),
    identity,
    timeoutMs: duration(options.timeout, where, 'timeout', problems),
    retentionMs: duration(options.retention, where, 'retention', problems, { allowZero: true }),
  };
}

function backoff(value: unknown, where: string, problems: string[]): StepBackoff | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
  if (typeof value === 'object' && value !== null) {
    const { type, delay } = value as { type?: unknown; delay?: unknown };
    if ((type === 'fixed' || type === 'exponential') && typeof delay === 'number' && Number.isInteger(delay) && delay >= 0) {
      return { type, delay };
    }
  }
  problems.push(`${where}: backoff must be a delay in ms or { type: 'fixed' | 'exponential', delay }, got ${JSON.stringify(value)}`);
  return undefined;
}

/** Checks `@Step()` options; problems are appended to `problems`. */
export function checkStepOptions(options: StepOptions, method: string, where: string, problems: string[]): CheckedStepOptions {
  unknownKeys(options, STEP_KEYS, where, problems);
  let attempts = 1;
  if (options.attempts !== undefined) {
    if (typeof options.attempts === 'number' && Number.isInteger(options.attempts) && options.attempts >= 1 && options.attempts <= 1000) {
      attempts = options.attempts;
    } else {
      problems.push(`${where}: attempts must be a whole number from 1 to 1000, got ${JSON.stringify(options.attempts)}`);
    }
  }
  return {
    name: name(options.name, method, where, problems),
    attempts,
    backoff: backoff(options.backoff, where, problems),
    timeoutMs: duration(options.timeout, where, 'timeout', problems),
    queue: queue(options.queue, DEFAULT_STEP_QUEUE, where, problems),
    transaction: stepTransaction(options, where, problems),
  };
}

function stepTransaction(options: StepOptions, where: string, problems: string[]): TransactionSetting {
  const { value, problems: found } = resolveTransactionSetting(options);
  for (const p of found) problems.push(`${where}: ${p.option}: ${p.message}`);
  return value;
}
