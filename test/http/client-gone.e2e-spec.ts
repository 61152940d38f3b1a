// A client that gives up (a timeout) before its response is written retries with the same key: the handler's
// outcome must still be recorded, so that the retry replays it instead of running the handler a second time.
// Nest still writes a handler's value into the closed connection (and that is what is recorded); for a handler's
// Observable it skips writing, and the interceptor records the value itself.
import { Controller, Post } from '@nestjs/common';
import { request as httpRequest, Server } from 'node:http';
import { defer } from 'rxjs';
import { Gate, Harness, Runs, startApp } from '../support/http-harness';
import { waitUntil } from '../support/resilience';
import { ADAPTERS } from '../support/test-app';

@Controller('gone')
class GoneController {
  constructor(private readonly runs: Runs, private readonly gate: Gate) {}

  @Post('promise')
  async promise() {
    await this.gate.pass();
    return { id: this.runs.inc('promise'), via: 'promise' };
  }

  @Post('observable')
  observable() {
    return defer(async () => {
      await this.gate.pass();
      return { id: this.runs.inc('observable'), via: 'observable' };
    });
  }
}

/** Sends a keyed POST and drops the connection once the handler is running. */
async function sendAndLeave(h: Harness, path: string, key: string): Promise<void> {
  const url = new URL(path, h.url);
  const req = httpRequest(url, { method: 'POST', headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' } });
  req.on('error', () => undefined);
  req.end('{}');
  await h.gate.started;
  req.destroy();
  const server = h.app.getHttpServer() as Server;
  await waitUntil('the server sees the connection close', () => new Promise<boolean>((resolve) => {
    server.getConnections((err, count) => resolve(!err && count === 0));
  }));
}

describe.each(ADAPTERS)('the client leaves before its response is written (%s)', (adapter) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startApp({ adapter, controllers: [GoneController], options: { http: { lockTimeout: '1s' } } });
  });
  afterAll(() => h?.close());
  beforeEach(() => h.gate.reset());

  it.each(['promise', 'observable'])('a handler returning a %s: its outcome is recorded and the retry replays it', async (kind) => {
    const key = `gone-${kind}`;
    await sendAndLeave(h, `/gone/${kind}`, key);
    h.gate.open();
    await waitUntil('the outcome is recorded', async () => (await h.records(key))[0]?.status === 'completed');

    const retry = await h.http().post(`/gone/${kind}`).set('Idempotency-Key', key).send({});
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(JSON.parse(retry.text)).toEqual({ id: 1, via: kind });
    expect(h.runs(kind)).toBe(1);
  });
});
