import type { Provider } from '@nestjs/common';
import { TaskClient } from './task.client';
import { TaskExplorer } from './task.explorer';
import { TaskMetadataAccessor } from './task-metadata.accessor';
import { TaskRegistry } from './task.registry';

/** The task providers: discovery (after the workflow explorer's, listed after it), registry and client. Tasks run on the workflow engine. */
export const taskProviders: Provider[] = [TaskMetadataAccessor, TaskRegistry, TaskExplorer, TaskClient];

/** The task providers an application may inject. */
export const taskExports = [TaskClient];
