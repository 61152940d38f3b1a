import { applyDecorators, Injectable, SetMetadata } from '@nestjs/common';
import type { WorkflowOptions } from './workflow.interfaces';
import { WORKFLOW_METADATA } from './workflow.constants';

/**
 * Marks an injectable class as a durable workflow. Its entry point is `run(input)`; its `@Step()` methods
 * run as BullMQ jobs with their outcomes checkpointed in Postgres. Options are validated at bootstrap.
 */
export function Workflow(options: WorkflowOptions = {}): ClassDecorator {
  return applyDecorators(Injectable(), SetMetadata(WORKFLOW_METADATA, { ...options }));
}
