import { Injectable } from '@nestjs/common';
import { TASK_METADATA, TASK_METHODS_METADATA } from './task.constants';
import type { TaskOptions } from './task.interfaces';

/** A `@Task()` method as declared: the property name and the raw options. */
export interface DeclaredTask {
  method: string | symbol;
  options: TaskOptions;
}

/** The one place that reads `@Task()` metadata. */
@Injectable()
export class TaskMetadataAccessor {
  /** The `@Task()` methods of a class, including inherited ones (a subclass's own definition wins). */
  tasks(target: unknown): DeclaredTask[] {
    if (typeof target !== 'function') return [];
    const found = new Map<string | symbol, DeclaredTask>();
    for (let proto = target.prototype as object | null; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto) as object | null) {
      for (const method of (Reflect.getOwnMetadata(TASK_METHODS_METADATA, proto) as (string | symbol)[] | undefined) ?? []) {
        if (found.has(method)) continue;
        const fn = Object.getOwnPropertyDescriptor(proto, method)?.value as object | undefined;
        const options = fn ? (Reflect.getMetadata(TASK_METADATA, fn) as TaskOptions | undefined) : undefined;
        found.set(method, { method, options: options ?? {} });
      }
    }
    return [...found.values()];
  }
}
