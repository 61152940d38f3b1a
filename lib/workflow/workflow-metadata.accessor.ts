import { Injectable } from '@nestjs/common';
import { STEP_METADATA, STEP_METHODS_METADATA, WORKFLOW_METADATA } from './workflow.constants';
import type { StepOptions, WorkflowOptions } from './workflow.interfaces';

/** A `@Step()` method as declared: the property name and the raw options. */
export interface DeclaredStep {
  method: string | symbol;
  options: StepOptions;
}

/** The one place that reads `@Workflow()` / `@Step()` metadata. */
@Injectable()
export class WorkflowMetadataAccessor {
  /** The raw `@Workflow()` options of a class, or undefined when it is not a workflow. */
  workflowOptions(target: unknown): WorkflowOptions | undefined {
    if (typeof target !== 'function') return undefined;
    return Reflect.getMetadata(WORKFLOW_METADATA, target) as WorkflowOptions | undefined;
  }

  /** The `@Step()` methods of a workflow class, including inherited ones (a subclass's own definition wins). */
  steps(target: abstract new (...args: never[]) => unknown): DeclaredStep[] {
    const found = new Map<string | symbol, DeclaredStep>();
    for (let proto = target.prototype as object | null; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto) as object | null) {
      const methods = (Reflect.getOwnMetadata(STEP_METHODS_METADATA, proto) as (string | symbol)[] | undefined) ?? [];
      for (const method of methods) {
        if (found.has(method)) continue;
        const fn = (Object.getOwnPropertyDescriptor(proto, method)?.value as object | undefined) ?? undefined;
        const options = fn ? (Reflect.getMetadata(STEP_METADATA, fn) as StepOptions | undefined) : undefined;
        found.set(method, { method, options: options ?? {} });
      }
    }
    return [...found.values()];
  }
}
