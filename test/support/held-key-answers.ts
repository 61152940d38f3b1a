import type { IdempotencyService } from '../../lib';

/**
 * Counts the engine's `in_progress` answers (a call that met its key held by another) from now until `stop()`: a
 * test lets the holder finish only once its duplicates have met the key, instead of assuming they already have.
 */
export function countHeldKeyAnswers(engine: IdempotencyService): { count: () => number; stop: () => void } {
  let held = 0;
  const begin = engine.begin.bind(engine);
  const spy = jest.spyOn(engine, 'begin').mockImplementation(async (request) => {
    const result = await begin(request);
    if (result.kind === 'in_progress') held++;
    return result;
  });
  return { count: () => held, stop: () => spy.mockRestore() };
}
