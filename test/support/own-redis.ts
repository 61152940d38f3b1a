import { removeServiceData, startRedis, StartedRedis, stopRedis } from './services';

/**
 * A Redis of the suite's own (a FLUSHALL or a pause there touches nobody else's data): started before the suite's
 * other `beforeAll` hooks when called first, stopped after its tests once `closeFirst` (what uses it: apps, child
 * processes) has run, its data removed.
 */
export function ownRedis(name: string, closeFirst: () => Promise<unknown> | void = () => undefined): { readonly url: string } {
  let started: StartedRedis | undefined;
  beforeAll(async () => {
    started = await startRedis(name);
  });
  afterAll(async () => {
    await closeFirst();
    if (started) await stopRedis(started);
    removeServiceData(name);
  });
  return {
    get url(): string {
      if (!started) throw new Error(`the Redis "${name}" is not started yet: read its url inside a hook or a test`);
      return started.url;
    },
  };
}
