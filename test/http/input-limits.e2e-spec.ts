// Issue 16 items 11–12: inputs the store cannot hold are refused before it is asked (4xx naming the limit, a
// named error for run()); only an outage is a 503, and only an outage lets failOpen run a handler unprotected.
import { Body, Controller, Post } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyInputTooLongError, IdempotencyService, StoreRejectedError, StoreUnavailableError } from '../../lib';
import { ConfiguredApp, startConfiguredApp } from '../support/configured-app';
import { expectProblem } from '../support/http-harness';
import { ADAPTERS, sql } from '../support/test-app';

const runs = new Map<string, number>();

@Controller()
class ChargeController {
  @Post('charge')
  charge(@Body() body: { ref: string }) {
    runs.set(body.ref, (runs.get(body.ref) ?? 0) + 1);
    return { ref: body.ref };
  }
}

describe.each(ADAPTERS)('inputs the store cannot take (%s)', (adapter) => {
  describe.each([false, true])('failOpen: %s', (failOpen) => {
    let s: ConfiguredApp;
    const table = () => `"${s.schema}".idempotency_records`;
    const charge = (key: string, ref: string, tenant = 'acme') =>
      request(s.url).post('/charge').set('Idempotency-Key', key).set('X-Tenant', tenant).send({ ref });

    beforeAll(async () => {
      s = await startConfiguredApp({
        adapter,
        controllers: [ChargeController],
        options: { http: { failOpen, scope: (req) => req.headers['x-tenant'] as string | undefined } },
      });
    });
    afterAll(() => s?.close());

    it('an 8,000-character scope → 400 problem+json naming the limit, every time; the handler never runs', async () => {
      const ref = `long-scope-${adapter}-${failOpen}`;
      for (let attempt = 0; attempt < 2; attempt++) {
        const res = await charge(`k-${ref}`, ref, 't'.repeat(8000));
        const problem = expectProblem(res, 400);
        expect(problem).toMatchObject({ code: 'scope-too-long' });
        expect(problem.detail).toContain('1024 bytes');
        expect(res.headers['retry-after']).toBeUndefined();
        expect(res.headers['idempotency-unprotected']).toBeUndefined();
      }
      expect(runs.get(ref)).toBeUndefined();
      expect(await sql(`SELECT 1 FROM ${table()} WHERE key = $1`, [`k-${ref}`])).toEqual([]);
      // A normal scope still works, and the protected response says nothing about protection.
      const ok = await charge(`k-${ref}`, ref);
      expect(ok.status).toBe(201);
      expect(ok.headers['idempotency-unprotected']).toBeUndefined();
    });

    it('a store error that is not an outage → 500, not 503 + Retry-After, and the handler does not run', async () => {
      const ref = `refused-${adapter}-${failOpen}`;
      const key = `k-${ref}`;
      // NOT VALID: existing rows are not checked; the claim's INSERT is, and Postgres refuses it (23514).
      await sql(`ALTER TABLE ${table()} ADD CONSTRAINT refuse_key CHECK (key <> '${key}') NOT VALID`);
      try {
        const res = await charge(key, ref);
        expect(res.status).toBe(500);
        expect(res.headers['retry-after']).toBeUndefined();
        expect(res.headers['idempotency-unprotected']).toBeUndefined();
        expect(runs.get(ref)).toBeUndefined();
      } finally {
        await sql(`ALTER TABLE ${table()} DROP CONSTRAINT refuse_key`);
      }
    });
  });
});

describe('IdempotencyService.run input limits', () => {
  it('IdempotencyService.run with a 9,000-character key throws IdempotencyInputTooLongError, not StoreUnavailableError', async () => {
    const s = await startConfiguredApp({ adapter: 'express', controllers: [] });
    try {
      const engine = s.app.get(IdempotencyService);
      let ran = false;
      const err = await engine.run('k'.repeat(9000), () => (ran = true)).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(IdempotencyInputTooLongError);
      expect(err).not.toBeInstanceOf(StoreUnavailableError);
      expect(err).toMatchObject({ code: 'IDEMPOTENCY_INPUT_TOO_LONG', input: 'key', bytes: 9000, limit: 1024 });
      expect((err as Error).message).toContain('1024 bytes');
      const scoped = await engine.run('k', () => (ran = true), { scope: 's'.repeat(2000) }).then(() => undefined, (e: unknown) => e);
      expect(scoped).toMatchObject({ code: 'IDEMPOTENCY_INPUT_TOO_LONG', input: 'scope' });
      expect(ran).toBe(false);
      // A multi-byte key is measured in bytes: 400 characters of 3 bytes each are over the limit.
      await expect(engine.run('€'.repeat(400), () => (ran = true))).rejects.toBeInstanceOf(IdempotencyInputTooLongError);
      expect(await engine.run('€'.repeat(300), () => 'ok')).toBe('ok');
      expect(ran).toBe(false);
      // A refusal by the store itself (here a CHECK constraint, 23514) is StoreRejectedError, not an outage.
      const table = `"${s.schema}".idempotency_records`;
      await sql(`ALTER TABLE ${table} ADD CONSTRAINT refuse_key CHECK (key <> 'refused') NOT VALID`);
      const refused = await engine.run('refused', () => (ran = true)).then(() => undefined, (e: unknown) => e);
      expect(refused).toBeInstanceOf(StoreRejectedError);
      expect(refused).toMatchObject({ code: 'STORE_REJECTED' });
      expect(ran).toBe(false);
    } finally {
      await s.close();
    }
  });
});
