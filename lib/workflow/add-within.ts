/** How long a start or an enqueue waits for Redis to take the job before it returns without it. */
export const ADD_WAIT_MS = 1000;

/**
 * Waits for `adding` (a job added to BullMQ) at most ADD_WAIT_MS. Postgres already holds the execution, so a stalled
 * Redis (paused, failing over, down: BullMQ's connection queues commands until it answers) does not hold up the
 * caller: the add goes on in the background, its job id makes a late one harmless, and should it fail, `onFailure`
 * is told and the reconciler adds the job once Redis answers again.
 */
export async function addWithin(adding: Promise<unknown>, onFailure: (err: Error) => void): Promise<void> {
  const settled = adding.then(() => undefined, (err: Error) => onFailure(err));
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([settled, new Promise<void>((resolve) => (timer = setTimeout(resolve, ADD_WAIT_MS)))]);
  clearTimeout(timer);
}
