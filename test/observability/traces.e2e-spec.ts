// Issue 14: spans for the interceptor's decision and each store call (key scope, never the key unless configured),
// and one trace per workflow execution: the run's span and its steps' spans (their context travels in the step
// job's data) share a trace id derived from the execution id, which a resumed run joins again; the caller is linked.
import { Controller, INestApplication, Post } from '@nestjs/common';
import { trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { IdempotencyService, IdempotencyTestingModule, Step, Workflow, WorkflowClient, WorkflowFailedError } from '../../lib';
import { listen, waitUntil } from '../support/resilience';
import { createTestApp, sql, uniqueSchema } from '../support/test-app';
import { FAST, uniquePrefix } from '../workflow/support';
import { startSpanRecorder } from './support';

jest.setTimeout(60_000);

@Controller()
class PayController {
  @Post('pay')
  pay() {
    return { paid: true };
  }
}

let failCharge = true;

@Workflow({ name: 'traced' })
class TracedWorkflow {
  async run(input: { amount: number }): Promise<string> {
    const reserved = await this.reserve(input.amount);
    return this.charge(reserved);
  }

  @Step()
  reserve(amount: number): Promise<string> {
    return Promise.resolve(`r${amount}`);
  }

  @Step({ attempts: 1 })
  charge(reserved: string): Promise<string> {
    return failCharge ? Promise.reject(new Error('card declined')) : Promise.resolve(`charged ${reserved}`);
  }
}

describe('traces (OpenTelemetry, in-memory span exporter)', () => {
  const schema = uniqueSchema('trc');
  let recorder: ReturnType<typeof startSpanRecorder>;
  let app: INestApplication;
  let url: string;
  const spans = () => recorder.exporter.getFinishedSpans();
  const named = (name: string) => spans().filter((s) => s.name === name);

  beforeAll(async () => {
    recorder = startSpanRecorder();
    app = await createTestApp({
      adapter: 'express', schema, controllers: [PayController], providers: [TracedWorkflow], options: { workflows: { ...FAST, queuePrefix: uniquePrefix() } },
    });
    url = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
    await recorder?.stop();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  it('traces the interceptor decision with its store calls as children; the key itself is not recorded', async () => {
    recorder.exporter.reset();
    expect((await request(url).post('/pay').set('Idempotency-Key', 'secret-key-1').send({})).status).toBe(201);
    expect((await request(url).post('/pay').set('Idempotency-Key', 'secret-key-1').send({})).status).toBe(201);
    const decisions = named('idempotency.claim');
    expect(decisions.map((s) => [s.attributes['idempotency.face'], s.attributes['idempotency.outcome']])).toEqual([['http', 'acquired'], ['http', 'replay']]);
    const [first] = decisions;
    expect(first.attributes['idempotency.scope']).toBe('http:');
    const children = spans().filter((s) => s.parentSpanContext?.spanId === first.spanContext().spanId).map((s) => s.name);
    expect(children).toEqual(expect.arrayContaining(['idempotency.redis.lookup', 'idempotency.postgres.claim']));
    expect(named('idempotency.postgres.complete')).toHaveLength(1);
    for (const span of spans()) expect(JSON.stringify(span.attributes)).not.toContain('secret-key-1');
  });

  it('records the key only when observability.recordKeys is set', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [IdempotencyTestingModule.forRoot({ observability: { recordKeys: true } })] }).compile();
    const testApp = await moduleRef.createNestApplication().init();
    try {
      recorder.exporter.reset();
      await testApp.get(IdempotencyService).run('visible-key', () => 1);
      expect(named('idempotency.claim')[0].attributes).toMatchObject({ 'idempotency.key': 'visible-key', 'idempotency.face': 'method' });
    } finally {
      await testApp.close();
    }
  });

  it('puts every run and step of a workflow execution in one trace, linked to the caller, resumed runs included', async () => {
    recorder.exporter.reset();
    const client = app.get(WorkflowClient);
    const caller = trace.getTracer('test');
    const { handle, callerContext } = await caller.startActiveSpan('checkout', async (span) => {
      try {
        return { handle: await client.start(TracedWorkflow, { amount: 5 }, { workflowId: 'trace-1' }), callerContext: span.spanContext() };
      } finally {
        span.end();
      }
    });
    await expect(handle.result({ timeout: 30_000 })).rejects.toBeInstanceOf(WorkflowFailedError);
    failCharge = false;
    await expect((await client.resume<string>('trace-1')).result({ timeout: 30_000 })).resolves.toBe('charged r5');

    const traceId = handle.executionId.replace(/-/g, '');
    const runs = await waitUntil('both runs ended', () => (named('idempotency.workflow traced').length === 2 ? named('idempotency.workflow traced') : undefined));
    for (const run of runs) {
      expect(run.spanContext().traceId).toBe(traceId);
      expect(run.attributes['idempotency.execution_id']).toBe(handle.executionId);
    }
    expect(runs[0].links.map((l) => l.context.spanId)).toEqual([callerContext.spanId]);

    const steps: ReadableSpan[] = spans().filter((s) => s.name.startsWith('idempotency.step '));
    expect(steps.map((s) => s.attributes['idempotency.step'])).toEqual(['reserve', 'charge', 'charge']);
    for (const step of steps) {
      expect(step.spanContext().traceId).toBe(traceId);
      expect(runs.map((r) => r.spanContext().spanId)).toContain(step.parentSpanContext?.spanId);
      expect(step.attributes['idempotency.step.attempt']).toBe(1);
    }
    expect(steps[1].status.code).toBe(0); // the attempt returned its failure to checkpoint: not an error of the span
  });
});
