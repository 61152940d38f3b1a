// Issue 16 items 21–22: problem `type` URIs link to the README section of each problem (or a configured base),
// with stable codes; a missing per-client scope is warned about once at startup, and `scope: 'global'` is silent.
import { Body, Controller, LoggerService, Post } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import { DEFAULT_PROBLEM_TYPE_BASE, IDEMPOTENCY_PROBLEMS, IdempotencyModuleOptions } from '../../lib';
import { startConfiguredApp } from '../support/configured-app';
import { expectProblem } from '../support/http-harness';
import { ADAPTERS, sql } from '../support/test-app';

@Controller()
class OrdersController {
  @Post('orders')
  create(@Body() body: unknown) {
    return { body };
  }
}

/** GitHub's (and npm's) heading anchor: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^a-z0-9 _-]/g, '').replace(/ /g, '-');
}

describe('problem type URIs', () => {
  const readme = readFileSync(join(__dirname, '../../README.md'), 'utf8');
  const anchors = new Set([...readme.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1])));

  it.each(Object.keys(IDEMPOTENCY_PROBLEMS))('the README has a section for "%s" at the default type URI', (code) => {
    const uri = `${DEFAULT_PROBLEM_TYPE_BASE}${code}`;
    expect(uri).toMatch(/^https:\/\//);
    // npm (and GitHub) give each heading the anchor `user-content-<slug>`.
    const anchor = uri.slice(uri.indexOf('#') + 1);
    expect(anchor.startsWith('user-content-')).toBe(true);
    expect(anchors.has(anchor.slice('user-content-'.length))).toBe(true);
  });

  describe.each(ADAPTERS)('%s', (adapter) => {
    it.each<[string, Partial<IdempotencyModuleOptions>, string]>([
      ['default', {}, DEFAULT_PROBLEM_TYPE_BASE],
      ['http.problemTypeBase', { http: { problemTypeBase: 'https://docs.example.com/problems/' } }, 'https://docs.example.com/problems/'],
    ])('%s: type is the base followed by the stable code, sent as `code` too', async (_name, options, base) => {
      const s = await startConfiguredApp({ adapter, controllers: [OrdersController], options });
      try {
        const key = `reused-${adapter}`;
        expect((await request(s.url).post('/orders').set('Idempotency-Key', key).send({ a: 1 })).status).toBe(201);
        const reused = expectProblem(await request(s.url).post('/orders').set('Idempotency-Key', key).send({ a: 2 }), 422);
        expect(reused).toMatchObject({ type: `${base}key-reused`, code: 'key-reused' });
        const invalid = expectProblem(await request(s.url).post('/orders').set('Idempotency-Key', '').send({ a: 1 }), 400);
        expect(invalid).toMatchObject({ type: `${base}invalid-key`, code: 'invalid-key' });
      } finally {
        await s.close();
      }
    });
  });
});

// The 503 sent in place of a success whose outcome could not be recorded is built apart from the other
// problems (at the wire, after the handler ran): it must point at the configured base too.
describe.each(ADAPTERS)('the 503 for an outcome that could not be stored (%s)', (adapter) => {
  it('has its type under http.problemTypeBase', async () => {
    const base = 'https://docs.example.com/problems/';
    const s = await startConfiguredApp({ adapter, controllers: [OrdersController], options: { http: { problemTypeBase: base } } });
    try {
      // A real Postgres refusal of the completion write (not an outage, so it is not retried): answered 503 at once.
      await sql(`CREATE FUNCTION "${s.schema}".refuse_completion() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'completion refused by the test'; END $$`);
      await sql(`CREATE TRIGGER refuse_completion BEFORE UPDATE ON "${s.schema}".idempotency_records
        FOR EACH ROW WHEN (NEW.status = 'completed') EXECUTE FUNCTION "${s.schema}".refuse_completion()`);
      const res = await request(s.url).post('/orders').set('Idempotency-Key', `unrecorded-${adapter}`).send({ a: 1 });
      expect(expectProblem(res, 503)).toMatchObject({ type: `${base}store-unavailable`, code: 'store-unavailable' });
    } finally {
      await s.close();
    }
  });
});

/** Keeps what the app logs. */
class CapturingLogger implements LoggerService {
  readonly warnings: string[] = [];
  log(): void {}
  error(): void {}
  debug(): void {}
  verbose(): void {}
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
}

describe('the startup warning about a missing scope', () => {
  it.each<[string, IdempotencyModuleOptions['http'], number]>([
    ['no scope → one warning', {}, 1],
    ["scope: 'global' → none", { scope: 'global' }, 0],
    ['a scope function → none', { scope: () => 'tenant' }, 0],
    ['HTTP idempotency off → none', { enabled: false }, 0],
  ])('%s', async (_name, http, expected) => {
    const logger = new CapturingLogger();
    const s = await startConfiguredApp({ adapter: 'express', controllers: [OrdersController], options: { http }, logger });
    try {
      const about = logger.warnings.filter((w) => w.includes('http.scope'));
      expect(about).toHaveLength(expected);
      if (expected > 0) expect(about[0]).toContain('scope: "global"');
    } finally {
      await s.close();
    }
  });
});
