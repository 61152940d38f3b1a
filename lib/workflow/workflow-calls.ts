import { NotInWorkflowError } from '../errors/not-in-workflow.error';
import type { Duration } from '../utils/duration';
import { parseDuration } from '../utils/duration';
import type { StartedChild } from './durable-calls';
import { DEFAULT_TOPIC } from './workflow.constants';
import { RunContext, runStorage } from './run-context';
import { stepStorage } from './step-context';
import type { WorkflowClass } from './workflow.client';

type InputOf<W> = W extends { run(input: infer I): unknown } ? I : never;
type ResultOf<W> = W extends { run(input: never): infer R } ? Awaited<R> : never;

/** Options of `recv()`. */
export interface RecvOptions {
  /** Give up after this long and return null (durable: counted from the first call, not from a replay). Default: wait. */
  timeout?: Duration;
}

/** Options of `startChild()` and `runChild()`. */
export interface StartChildOptions {
  /** The child's workflow id. Default: derived from this execution and the call's position (stable across replays). */
  workflowId?: string;
}

/** A child workflow started with `startChild()`: its ids, and its result (awaited durably, inside the parent's run). */
export interface ChildWorkflowHandle<R = unknown> {
  readonly workflowId: string;
  readonly executionId: string;
  /**
   * Waits for the child's outcome, as a durable call of the parent (it takes a journal position when called): the
   * child's result, or `ChildWorkflowFailedError` when it failed, was cancelled or timed out. Call it in the parent's `run()`.
   */
  result(): Promise<R>;
}

/** The run whose `run()` is calling `call`; a step or code outside a workflow gets NotInWorkflowError. */
function currentRun(call: string): RunContext {
  if (stepStorage.getStore()) throw new NotInWorkflowError(call, 'step');
  const run = runStorage.getStore();
  if (!run) throw new NotInWorkflowError(call, 'outside');
  return run;
}

function durationMs(call: string, value: Duration): number {
  const ms = parseDuration(value);
  if (typeof ms === 'object') throw new TypeError(`${call}: ${ms.error}`);
  return ms;
}

/**
 * Sleeps durably inside a workflow's `run()`: the wake-up time is checkpointed at the call's journal position, the
 * run holds no worker slot while it sleeps (its job is delayed), and after a crash or a Redis loss it wakes at the
 * stored time. On replay a finished sleep returns at once. Throws NotInWorkflowError in a step or outside a workflow.
 */
export async function sleep(duration: Duration): Promise<void> {
  const run = currentRun('sleep()');
  return run.calls.sleep(run, durationMs('sleep()', duration));
}

/**
 * The next message sent to this workflow (`WorkflowClient.send`) on `topic`, or null after `timeout`. Each message is
 * received exactly once, in send order per topic; a replay gets the same message at the same position. Messages sent
 * before the call wait for it. Throws NotInWorkflowError in a step or outside a workflow.
 */
export async function recv<T = unknown>(topic?: string, options: RecvOptions = {}): Promise<T | null> {
  const run = currentRun('recv()');
  const timeoutMs = options.timeout === undefined ? null : durationMs('recv({ timeout })', options.timeout);
  return (await run.calls.recv(run, topic ?? DEFAULT_TOPIC, timeoutMs)) as T | null;
}

/**
 * Publishes a value under `key`, readable from outside with `WorkflowClient.getEvent()`; a later `setEvent` on the
 * same key replaces it. Recorded at its journal position: a replay does not set it again. The value must be JSON.
 */
export async function setEvent(key: string, value: unknown): Promise<void> {
  const run = currentRun('setEvent()');
  if (typeof key !== 'string' || key.length === 0) throw new TypeError('setEvent(key, value): key must be a non-empty string');
  const json = JSON.stringify(value);
  return run.calls.setEvent(run, key, json === undefined ? null : (JSON.parse(json) as unknown));
}

/**
 * Starts a child workflow and returns its handle. Its default workflow id is derived from this execution and the
 * call's position, so a replay or a recovery never starts a second child. Parent and child are linked in storage
 * (`WorkflowExecution.parentExecutionId`); cancelling the parent cancels its unfinished children.
 */
export async function startChild<W extends { run(input: never): unknown }>(
  workflow: WorkflowClass<W> | string,
  input: InputOf<W>,
  options: StartChildOptions = {},
): Promise<ChildWorkflowHandle<ResultOf<W>>> {
  const run = currentRun('startChild()');
  const registered = run.calls.workflowOf(workflow);
  const started = await run.calls.startChild(run, registered, input, options.workflowId);
  return childHandle<ResultOf<W>>(run, started);
}

/** `startChild(...)` and then its `result()`: the child's result, or ChildWorkflowFailedError. */
export async function runChild<W extends { run(input: never): unknown }>(
  workflow: WorkflowClass<W> | string,
  input: InputOf<W>,
  options: StartChildOptions = {},
): Promise<ResultOf<W>> {
  return (await startChild(workflow, input, options)).result();
}

function childHandle<R>(parent: RunContext, started: StartedChild): ChildWorkflowHandle<R> {
  return {
    workflowId: started.workflowId,
    executionId: started.executionId,
    result: async () => {
      const run = currentRun('result() of a child workflow handle');
      if (run !== parent) throw new NotInWorkflowError('result() of a child workflow handle (from another run than the one that started it)', 'outside');
      return (await run.calls.childResult(run, started)) as R;
    },
  };
}
