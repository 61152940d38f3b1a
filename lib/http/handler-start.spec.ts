import 'reflect-metadata';
import type { CallHandler } from '@nestjs/common';
import { AsyncResource } from 'node:async_hooks';
import { defer } from 'rxjs';
import { HandlerNeverStartedError, HandlerStart, handlerStartsWaiting, trackRouteHandler } from './handler-start';

class Controller {
  create(): string {
    return 'created';
  }
}
trackRouteHandler(Controller.prototype, 'create');

/**
 * `next` as Nest builds it: the call is bound to the async context of `handle()` and reaches the route handler
 * after an asynchronous pipe; `pipe` may refuse the request before the handler starts.
 */
function nestNext(controller: Controller, pipe: () => Promise<void> = () => Promise.resolve()): CallHandler {
  return {
    handle: () => defer(AsyncResource.bind(async () => {
      await pipe();
      await new Promise((resolve) => setImmediate(resolve));
      return controller.create();
    })),
  };
}

describe('HandlerStart', () => {
  it('sees its route handler start across the pipes, and stops watching once the call ended', async () => {
    const start = new HandlerStart();
    await expect(start.call(nestNext(new Controller()))).resolves.toBe('created');
    expect(start.started).toBe(true);
    expect(handlerStartsWaiting()).toBe(0);
  });

  it('reports a refusal before the handler as HandlerNeverStartedError, and stops watching', async () => {
    const start = new HandlerStart();
    const refused = start.call(nestNext(new Controller(), () => Promise.reject(new Error('invalid body'))));
    await expect(refused).rejects.toBeInstanceOf(HandlerNeverStartedError);
    expect(start.started).toBe(false);
    expect(handlerStartsWaiting()).toBe(0);
  });

  it('keeps each concurrent call to its own start, and watches again after a pause', async () => {
    for (let round = 0; round < 2; round++) {
      const starts = [new HandlerStart(), new HandlerStart(), new HandlerStart()];
      const calls = starts.map((start) => start.call(nestNext(new Controller())));
      expect(handlerStartsWaiting()).toBe(3); // each call subscribed: all three wait for their handler
      await Promise.all(calls);
      expect(starts.map((s) => s.started)).toEqual([true, true, true]);
      expect(handlerStartsWaiting()).toBe(0);
    }
  });

  it('leaves a call outside any start alone', () => {
    expect(new Controller().create()).toBe('created');
    expect(handlerStartsWaiting()).toBe(0);
  });
});
