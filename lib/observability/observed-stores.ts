import type { ClaimRequest, Claim, CompletedRecord } from '../core/idempotency-record';
import type { CacheLookup, IdempotencyCache } from '../storage/idempotency.cache';
import type { IdempotencyStore } from '../storage/idempotency.store';
import type { NewExecution } from '../workflow/storage/workflow.store';
import type { WorkflowStore } from '../workflow/storage/workflow.store';
import type { WorkflowExecution } from '../workflow/workflow.interfaces';
import { IdempotencyObserver, NoopObserver, StoreName } from './idempotency-observer';

type AnyCall = (...args: unknown[]) => Promise<unknown>;
/** What to note after a call: its arguments and result. */
type After = (observer: IdempotencyObserver, args: unknown[], result: unknown) => void;

/**
 * Wraps the named async methods of `target` so that each call is timed and traced by the observer (and `after` notes
 * what it means). A Proxy, not a subclass: methods added to the store later keep working, just unobserved.
 */
function observed<T extends object>(
  target: T,
  observer: IdempotencyObserver,
  store: StoreName,
  operations: Record<string, { scopeArg?: (args: unknown[]) => string | undefined; after?: After; name?: string }>,
): T {
  if (observer instanceof NoopObserver) return target;
  const wrappers = new Map<string, AnyCall>();
  // Every method comes back bound to the store itself: called on the proxy, its own `this.…` reads would each go
  // through this trap (several per call on the hot path).
  const bound = new Map<string, { method: AnyCall; bound: AnyCall }>();
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof property !== 'string' || typeof value !== 'function' || property === 'constructor') return value;
      // A method replaced on the instance (a test's spy, a patch) is returned as it is: it reads back as itself, and
      // it calls through to the observed method it replaced.
      if (Object.prototype.hasOwnProperty.call(object, property)) return value;
      const method = value as AnyCall;
      // Not recording (no OpenTelemetry provider registered yet): the store's own method, no wrapper at all.
      if (!(property in operations) || !observer.isRecording()) {
        let entry = bound.get(property);
        if (entry?.method !== method) {
          entry = { method, bound: method.bind(object) };
          bound.set(property, entry);
        }
        return entry.bound;
      }
      let wrapper = wrappers.get(property);
      if (!wrapper) {
        const spec = operations[property];
        wrapper = async function (...args: unknown[]) {
          const result = await observer.storeCall(store, spec.name ?? property, spec.scopeArg?.(args), () => method.apply(object, args));
          spec.after?.(observer, args, result);
          return result;
        };
        wrappers.set(property, wrapper);
      }
      return wrapper;
    },
  });
}

const claimScope = (args: unknown[]) => (args[0] as Claim | ClaimRequest).scope;

/** The key store with each call timed and traced; releases and lost completions counted. */
export function observeIdempotencyStore(store: IdempotencyStore, observer: IdempotencyObserver): IdempotencyStore {
  return observed(store, observer, 'postgres', {
    claim: { scopeArg: claimScope },
    complete: {
      scopeArg: claimScope,
      after: (o, args, record) => {
        if ((record as CompletedRecord | null) === null) o.completionLost(claimScope(args));
      },
    },
    release: { scopeArg: claimScope, after: (o, args) => o.released(claimScope(args)) },
    extendLease: { scopeArg: claimScope },
    recentFailure: { scopeArg: (args) => args[0] as string },
    find: { scopeArg: (args) => args[0] as string },
  });
}

/** The Redis cache with each call timed and traced, and what each lookup answered counted (the hit ratio). */
export function observeIdempotencyCache(cache: IdempotencyCache, observer: IdempotencyObserver): IdempotencyCache {
  if (!cache.holdsRecords) return cache;
  const scope = (args: unknown[]) => args[0] as string;
  return observed(cache, observer, 'redis', {
    lookup: { scopeArg: scope, after: (o, _args, result) => o.cacheLookup((result as CacheLookup).kind) },
    // The transactional mode's read of a finished outcome (nothing marked): a lookup too, for the hit ratio.
    peek: { scopeArg: scope, after: (o, _args, result) => o.cacheLookup(result ? 'hit' : 'miss') },
    remember: { scopeArg: scope },
    forget: { scopeArg: scope },
    touch: { scopeArg: scope },
  });
}

const WORKFLOW_READS = ['begin', 'recordRunEnd', 'release', 'stepState', 'recordedBetween', 'get', 'latest', 'resume', 'list', 'steps', 'unfinished', 'timeOutExpired', 'deleteFinished', 'activity'];

/**
 * The workflow store with each call timed and traced; starts (and the workflow and task faces' claim outcomes), final
 * statuses, step checkpoints and recoveries counted.
 */
export function observeWorkflowStore(store: WorkflowStore, observer: IdempotencyObserver): WorkflowStore {
  const operations: Parameters<typeof observed>[3] = Object.fromEntries(WORKFLOW_READS.map((name) => [name, { name: `workflow.${name}` }]));
  operations.insert = {
    name: 'workflow.insert',
    after: (o, args, result) => {
      const wanted = args[0] as NewExecution;
      const { inserted, execution } = result as { inserted: boolean; execution: WorkflowExecution & { inputHash: string } };
      // Tasks share the executions table and its claim; they are counted under their own face, not as workflow starts.
      const face = wanted.kind === 'task' ? 'task' : 'workflow';
      if (inserted || execution.executionId === wanted.executionId) {
        o.claimed(face, 'acquired');
        if (face === 'workflow') o.workflowStarted(wanted.workflowName);
      } else if (execution.workflowName !== wanted.workflowName || execution.inputHash !== wanted.inputHash) {
        o.claimed(face, 'mismatch');
      } else {
        o.claimed(face, execution.status === 'completed' ? 'replay' : 'in_progress');
      }
    },
  };
  operations.finish = { name: 'workflow.finish', after: (o, args) => o.workflowFinished(args[1] as string) };
  operations.cancel = {
    name: 'workflow.cancel',
    after: (o, _args, result) => {
      if (result) o.workflowFinished('cancelled');
    },
  };
  operations.checkpoint = {
    name: 'workflow.checkpoint',
    after: (o, args) => o.stepCheckpointed(args[2] as string, (args[3] as { status: string }).status, args[4] as number),
  };
  operations.countRecovery = {
    name: 'workflow.countRecovery',
    after: (o, _args, kept) => {
      if (kept) o.workflowRecovered();
      else o.workflowFinished('failed');
    },
  };
  return observed(store, observer, 'postgres', operations);
}
