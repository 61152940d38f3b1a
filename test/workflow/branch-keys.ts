import type { StepCheckpoint } from '../../lib';
import { sql } from '../support/test-app';

/** The `finish` runs the branches fixture logged for a workflow id: argument → the step keys it ran under. */
export async function finishKeys(schema: string, workflowId: string): Promise<Map<string, Set<string>>> {
  const rows = await sql<{ step: string }>(`SELECT step FROM "${schema}".step_runs WHERE workflow_id = $1 AND phase = 'start' AND step LIKE 'finish|%'`, [
    workflowId,
  ]);
  const keys = new Map<string, Set<string>>();
  for (const { step } of rows) {
    const [, arg, key] = step.split('|');
    keys.set(arg, (keys.get(arg) ?? new Set()).add(key));
  }
  return keys;
}

/**
 * Each `finish` call kept its own step key across every run, crash and replay: one key per argument, no key shared
 * by two arguments, and it is `<execution>:<position>` of the checkpoint that holds that argument's result.
 */
export async function expectOwnKeys(schema: string, workflowId: string, executionId: string, items: string[], steps: StepCheckpoint[]): Promise<void> {
  const keys = await finishKeys(schema, workflowId);
  const expected = new Map<string, Set<string>>();
  for (const x of items) {
    const checkpoint = steps.find((c) => c.name === 'finish' && c.result === `B(A(${x}))`);
    expected.set(`A(${x})`, new Set([`${executionId}:${checkpoint?.position ?? 'missing'}`]));
  }
  expect(keys).toEqual(expected);
}
