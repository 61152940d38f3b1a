import { Inject, Injectable } from '@nestjs/common';
import { ChildWorkflowFailedError } from '../errors/child-workflow-failed.error';
import { WorkflowError } from '../errors/workflow.error';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedOptions } from '../interfaces/resolved-options';
import { verifyRecorded, waitAsRecorded } from './journal-verify';
import { RunContext } from './run-context';
import { produceOutcome, waitInRun } from './run-waits';
import { serializeError } from './serialize-error';
import { stepArgsHash } from './step-args-hash';
import { StepOutcome, WaitKind, WorkflowStore } from './storage/workflow.store';
import { WorkflowClient } from './workflow.client';
import type { StepCheckpoint, WorkflowStatus } from './workflow.interfaces';
import { WorkflowQueues } from './workflow-queues';
import { RegisteredWorkflow, WorkflowRegistry } from './workflow.registry';

/** The journal names of the durable calls (a step's name cannot start with "@"). */
export const DURABLE_CALL = {
  sleep: '@sleep',
  recv: '@recv',
  setEvent: '@setEvent',
  startChild: '@startChild',
  childResult: '@childResult',
} as const;

/** @internal What `@startChild` records. */
export interface StartedChild {
  workflowId: string;
  executionId: string;
}

const FINAL: readonly WorkflowStatus[] = ['completed', 'failed', 'cancelled', 'timed_out'];

/**
 * @internal The durable calls of a workflow function besides steps — `sleep`, `recv`, `setEvent`, starting a child and
 * awaiting its result. Each takes the next journal position, like a step: a recorded outcome answers it on replay
 * (after checking its name and argument hash), otherwise the outcome is produced and checkpointed, and the journal
 * delivers it in its turn. Waiting (for a time, a message, a child) does not keep the run busy: a run that only waits
 * suspends (see `scheduleIdleCheck`), and its wake-up time is in Postgres.
 */
@Injectable()
export class DurableCalls {
  constructor(
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedOptions,
    private readonly store: WorkflowStore,
    private readonly queues: WorkflowQueues,
    private readonly client: WorkflowClient,
    private readonly registry: WorkflowRegistry,
  ) {}

  /** The registered workflow of a class or name (WorkflowNotFoundError otherwise). */
  workflowOf(workflow: string | (abstract new (...args: never[]) => unknown)): RegisteredWorkflow {
    return this.registry.get(workflow);
  }

  /** A durable sleep: the wake-up time is registered at the call's position; a replay after it returns at once. */
  async sleep(run: RunContext, durationMs: number): Promise<void> {
    await this.call(run, DURABLE_CALL.sleep, null, async (position) => {
      const wakeAt = await this.registerWait(run, position, 'sleep', null, durationMs);
      while (Date.now() < wakeAt) await waitInRun(run, position, wakeAt);
      return this.complete(run, position, DURABLE_CALL.sleep, null, null);
    });
  }

  /** The next message of a topic, consumed exactly once at the call's position; null once the timeout passed. */
  async recv(run: RunContext, topic: string, timeoutMs: number | null): Promise<unknown> {
    const id = run.execution.executionId;
    const argsHash = stepArgsHash([topic]);
    const checkpoint = await this.call(run, DURABLE_CALL.recv, argsHash, async (position) => {
      const wakeAt = await this.registerWait(run, position, 'recv', argsHash, timeoutMs);
      for (;;) {
        const received = await this.store.receive(id, position, topic, argsHash);
        if (received) return received;
        if (Date.now() >= wakeAt) return this.complete(run, position, DURABLE_CALL.recv, null, argsHash);
        await waitInRun(run, position, wakeAt, this.options.workflows.pollIntervalMs);
      }
    });
    return checkpoint.result === null ? null : (checkpoint.result as { message: unknown }).message;
  }

  /** Sets the value of an event key once, at the call's position (a replay does not set it again). */
  async setEvent(run: RunContext, key: string, value: unknown): Promise<void> {
    const argsHash = stepArgsHash([key]);
    await this.call(run, DURABLE_CALL.setEvent, argsHash, async (position) => {
      await this.store.setEvent(run.execution.executionId, key, value);
      // getEvent waiters poll too: a signal Redis could not carry only delays them.
      await this.queues.publishEventSet(run.workflow.queue, run.execution.executionId, key).catch(() => undefined);
      return this.complete(run, position, DURABLE_CALL.setEvent, null, argsHash);
    });
  }

  /**
   * Starts a child workflow under `workflowId`, or by default an id derived from this execution and the call's
   * position, so a replay or a recovery finds the same child instead of starting another.
   */
  async startChild(run: RunContext, workflow: RegisteredWorkflow, input: unknown, workflowId: string | undefined): Promise<StartedChild> {
    const argsHash = stepArgsHash([workflow.name, workflowId ?? null]);
    const checkpoint = await this.call(run, DURABLE_CALL.startChild, argsHash, async (position) => {
      const parent = run.execution.executionId;
      try {
        const child = await this.client.startChild(workflow, input, workflowId ?? `${parent}-${position}`, parent);
        return await this.complete(run, position, DURABLE_CALL.startChild, { workflowId: child.workflowId, executionId: child.executionId }, argsHash);
      } catch (err) {
        // A start the library refuses (the id holds another workflow or input): the workflow gets it, now and on replay.
        if (!(err instanceof WorkflowError)) throw err;
        return this.complete(run, position, DURABLE_CALL.startChild, { error: serializeError(err) }, argsHash, true);
      }
    });
    if (checkpoint.status === 'failed') throw this.storedFailure(run, checkpoint);
    return checkpoint.result as StartedChild;
  }

  /** Waits for a child's outcome (recorded at the call's position): its result, or ChildWorkflowFailedError. */
  async childResult(run: RunContext, child: StartedChild): Promise<unknown> {
    const argsHash = stepArgsHash([child.executionId]);
    const checkpoint = await this.call(run, DURABLE_CALL.childResult, argsHash, async (position) => {
      for (;;) {
        const execution = await this.store.get(child.executionId);
        if (!execution) {
          const missing = { name: 'WorkflowNotFoundError', message: 'the child execution no longer exists (retention removed it before the parent read it)' };
          return this.complete(run, position, DURABLE_CALL.childResult, { status: 'missing', error: missing }, argsHash, true);
        }
        if (execution.status === 'completed') return this.complete(run, position, DURABLE_CALL.childResult, execution.result ?? null, argsHash);
        if (FINAL.includes(execution.status)) {
          const error = execution.error ?? { name: 'WorkflowCancelledError', message: `the child execution was ${execution.status}` };
          return this.complete(run, position, DURABLE_CALL.childResult, { status: execution.status, error }, argsHash, true);
        }
        await waitInRun(run, position, Infinity, this.options.workflows.pollIntervalMs);
      }
    });
    if (checkpoint.status === 'completed') return checkpoint.result;
    const { error } = checkpoint;
    const status = ((error as { status?: string } | null)?.status) ?? 'failed';
    const failure = new ChildWorkflowFailedError(child.workflowId, child.executionId, status, stripStatus(error));
    run.journal.noteFailure(failure, checkpoint.position);
    throw failure;
  }

  /**
   * The wake-up time of the wait at a position: as registered before this run began, else registered now. A wait of
   * another kind or call registered there (the code changed while it waited) stops the run with a DeterminismError.
   */
  private async registerWait(run: RunContext, position: number, kind: WaitKind, argsHash: string | null, afterMs: number | null): Promise<number> {
    const wait = run.registeredWaits.get(position) ?? (await this.store.registerWait(run.execution.executionId, position, kind, argsHash, afterMs));
    verifyRecorded(run, position, `@${kind}`, argsHash, waitAsRecorded(position, wait));
    return wait.wakeAt;
  }

  /** Takes the next position; a recorded outcome answers it, otherwise `produce` makes it. Returns the outcome in its turn. */
  private async call(run: RunContext, name: string, argsHash: string | null, produce: (position: number) => Promise<StepCheckpoint>): Promise<StepCheckpoint> {
    if (run.stopped) throw run.stopped;
    const { position, recorded, outcome } = run.journal.call();
    if (recorded) verifyRecorded(run, position, name, argsHash, recorded);
    if (recorded?.status !== 'completed' && recorded?.status !== 'failed') void produceOutcome(run, () => produce(position));
    const checkpoint = await outcome;
    verifyRecorded(run, position, name, argsHash, checkpoint);
    return checkpoint;
  }

  /** Checkpoints a durable call's outcome (a failure stores `result.error` with `result.status`, if any, as its error). */
  private async complete(run: RunContext, position: number, name: string, result: unknown, argsHash: string | null, failed = false): Promise<StepCheckpoint> {
    const outcome: StepOutcome = failed
      ? { status: 'failed', error: { ...(result as { error: StepCheckpoint['error'] }).error!, ...statusOf(result) } }
      : { status: 'completed', result };
    return (await this.store.checkpoint(run.execution.executionId, position, name, outcome, 1, argsHash)).checkpoint;
  }

  /** A stored failure of `@startChild` as the error the workflow gets. */
  private storedFailure(run: RunContext, checkpoint: StepCheckpoint): Error {
    const stored = checkpoint.error ?? { name: 'Error', message: 'unknown error' };
    const error = Object.assign(new Error(stored.message), { name: stored.name, code: stored.code });
    run.journal.noteFailure(error, checkpoint.position);
    return error;
  }
}

/** Keeps the child's final status beside its error (as `status`) in the parent's checkpoint. */
function statusOf(result: unknown): { status?: string } {
  const status = (result as { status?: unknown }).status;
  return typeof status === 'string' ? { status } : {};
}

function stripStatus(error: StepCheckpoint['error']): NonNullable<StepCheckpoint['error']> {
  const rest: NonNullable<StepCheckpoint['error']> & { status?: string } = { ...(error ?? { name: 'Error', message: 'unknown error' }) };
  delete rest.status;
  return rest;
}
