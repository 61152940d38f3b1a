// SEMANTICS §1 lines 5–6: the request fingerprint (canonical JSON, ignored fields) and key reuse → 422.
import { Body, Controller, Patch, Post, Query } from '@nestjs/common';
import { Idempotent, IdempotencyModuleOptions } from '../../lib';
import { expectProblem, Gate, Harness, rawJson, RecordRow, Runs, startApp } from '../support/http-harness';
import { ADAPTERS } from '../support/test-app';

@Controller()
class FingerprintController {
  constructor(private readonly runs: Runs, private readonly gate: Gate) {}

  @Post('fp')
  create(@Body() body: unknown, @Query() query: unknown) {
    return { run: this.runs.inc('fp'), body, query };
  }

  @Patch('fp')
  patch(@Body() body: unknown) {
    return { run: this.runs.inc('fpPatch'), body };
  }

  @Post('other')
  other(@Body() body: unknown) {
    return { run: this.runs.inc('other'), body };
  }

  @Post('ignoring')
  @Idempotent({ ignoreBodyFields: ['meta.sentAt', 'nonce'] })
  ignoring(@Body() body: unknown) {
    return { run: this.runs.inc('ignoring'), body };
  }

  @Post('slow')
  async slow(@Body() body: unknown) {
    const run = this.runs.inc('slow');
    await this.gate.pass();
    return { run, body };
  }
}

/** The columns of a record that must not change when a request is refused. */
function snapshot(rows: RecordRow[]) {
  return rows.map((r) => ({
    id: r.id, status: r.status, fingerprint: r.fingerprint, attempts: r.attempts, result: r.result, expires: r.expires_at.getTime(),
  }));
}

const STORES: [string, Partial<IdempotencyModuleOptions>][] = [
  ['Redis + Postgres', {}],
  ['Postgres alone', { redis: false }],
];

describe.each(ADAPTERS)('request fingerprint (%s)', (adapter) => {
  describe.each(STORES)('%s', (_store, storeOptions) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startApp({ adapter, controllers: [FingerprintController], options: storeOptions });
    });
    afterAll(() => h.close());

    const post = (key: string, text: string, path = '/fp') => rawJson(h.http().post(path).set('Idempotency-Key', key), text);

    it('treats reordered object keys as the same request', async () => {
      const first = await post('order-1', '{"b":2,"a":1}');
      const second = await post('order-1', '{"a":1,"b":2}');
      expect(first.status).toBe(201);
      expect(second.status).toBe(201);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(second.text).toBe(first.text);
      expect(h.runs('fp')).toBe(1);
    });

    it('sorts keys at every depth', async () => {
      const before = h.runs('fp');
      const first = await post('nested-1', '{"outer":{"y":[{"q":1,"p":2}],"x":{"d":4,"c":3}},"a":0}');
      const second = await post('nested-1', '{"a":0,"outer":{"x":{"c":3,"d":4},"y":[{"p":2,"q":1}]}}');
      expect(first.status).toBe(201);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(second.text).toBe(first.text);
      expect(h.runs('fp')).toBe(before + 1);
    });

    it('ignores insignificant whitespace', async () => {
      const before = h.runs('fp');
      const first = await post('ws-1', '{"a":1,"list":[1,2,3],"o":{"k":"v w"}}');
      const second = await post('ws-1', ' {\n  "a" : 1 ,\t"list" : [ 1 , 2 , 3 ],\r\n "o" : { "k" : "v w" }\n}\n');
      expect(first.status).toBe(201);
      expect(second.status).toBe(201);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(h.runs('fp')).toBe(before + 1);
    });

    it('keeps array order: a reordered array is another request (422)', async () => {
      const before = h.runs('fp');
      await post('array-1', '{"l":[1,2]}').expect(201);
      expectProblem(await post('array-1', '{"l":[2,1]}'), 422);
      expect(h.runs('fp')).toBe(before + 1);
    });

    it('counts string whitespace inside values (it is significant)', async () => {
      await post('value-ws', '{"k":"a b"}').expect(201);
      expectProblem(await post('value-ws', '{"k":"a  b"}'), 422);
    });

    it('leaves out the body fields a route names (ignoreBodyFields)', async () => {
      const send = (text: string) => rawJson(h.http().post('/ignoring').set('Idempotency-Key', 'ignore-1'), text);
      const first = await send('{"amount":5,"nonce":"n1","meta":{"sentAt":"2024-01-01T00:00:00Z","source":"app"}}');
      const second = await send('{"amount":5,"nonce":"n2","meta":{"source":"app","sentAt":"2025-06-30T12:00:00Z"}}');
      const third = await send('{"meta":{"source":"app"},"amount":5}');
      expect(first.status).toBe(201);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(second.text).toBe(first.text);
      expect(third.headers['idempotent-replayed']).toBe('true');
      expect(h.runs('ignoring')).toBe(1);
      // A field that is not ignored still counts, also next to an ignored one.
      expectProblem(await send('{"amount":5,"nonce":"n1","meta":{"sentAt":"2024-01-01T00:00:00Z","source":"web"}}'), 422);
      expectProblem(await send('{"amount":6,"nonce":"n1","meta":{"sentAt":"2024-01-01T00:00:00Z","source":"app"}}'), 422);
      expect(h.runs('ignoring')).toBe(1);
    });

    it('includes the query string in the fingerprint', async () => {
      const before = h.runs('fp');
      const first = await post('query-1', '{"a":1}', '/fp?page=1');
      const same = await post('query-1', '{"a":1}', '/fp?page=1');
      expect(first.status).toBe(201);
      expect(same.headers['idempotent-replayed']).toBe('true');
      expectProblem(await post('query-1', '{"a":1}', '/fp?page=2'), 422);
      expectProblem(await post('query-1', '{"a":1}', '/fp'), 422);
      expect(h.runs('fp')).toBe(before + 1);
    });

    describe.each([
      ['another body', (x: Harness, key: string) => rawJson(x.http().post('/fp').set('Idempotency-Key', key), '{"amount":2}')],
      ['another path', (x: Harness, key: string) => rawJson(x.http().post('/other').set('Idempotency-Key', key), '{"amount":1}')],
      ['another method', (x: Harness, key: string) => rawJson(x.http().patch('/fp').set('Idempotency-Key', key), '{"amount":1}')],
      ['no body', (x: Harness, key: string) => x.http().post('/fp').set('Idempotency-Key', key)],
    ] as const)('same key with %s', (label, sendOther) => {
      it('→ 422 problem+json; nothing runs; the record is unchanged; the original still replays', async () => {
        const key = `reuse-${label.replace(/ /g, '-')}`;
        const original = await post(key, '{"amount":1}');
        expect(original.status).toBe(201);
        const runsBefore = { fp: h.runs('fp'), other: h.runs('other'), fpPatch: h.runs('fpPatch') };
        const stored = snapshot(await h.records(key));
        expect(stored).toHaveLength(1);
        expect(stored[0].status).toBe('completed');

        const reused = await sendOther(h, key);
        const problem = expectProblem(reused, 422);
        expect(problem.type).toMatch(/key-reused/);
        expect(reused.headers['idempotent-replayed']).toBeUndefined();
        // Twice, so a cached answer and a Postgres answer are both exercised.
        expectProblem(await sendOther(h, key), 422);

        expect({ fp: h.runs('fp'), other: h.runs('other'), fpPatch: h.runs('fpPatch') }).toEqual(runsBefore);
        expect(snapshot(await h.records(key))).toEqual(stored);

        const retry = await post(key, '{"amount":1}');
        expect(retry.status).toBe(201);
        expect(retry.headers['idempotent-replayed']).toBe('true');
        expect(retry.text).toBe(original.text);
        expect(h.runs('fp')).toBe(runsBefore.fp);
      });
    });

    it('reports a mismatch while the first request is still in flight as 422, not 409', async () => {
      h.gate.reset();
      const key = 'inflight-mismatch';
      const first = rawJson(h.http().post('/slow').set('Idempotency-Key', key), '{"amount":1}').then((r) => r);
      await h.gate.started;
      try {
        const other = await rawJson(h.http().post('/slow').set('Idempotency-Key', key), '{"amount":999}');
        expectProblem(other, 422);
        const otherPath = await rawJson(h.http().post('/other').set('Idempotency-Key', key), '{"amount":1}');
        expectProblem(otherPath, 422);
        // The same request while in flight is the in-progress case.
        const same = await rawJson(h.http().post('/slow').set('Idempotency-Key', key), '{"amount":1}');
        expectProblem(same, 409);
        const rows = await h.records(key);
        expect(rows.map((r) => r.status)).toEqual(['in_progress']);
      } finally {
        h.gate.open();
      }
      const done = await first;
      expect(done.status).toBe(201);
      expect(h.runs('slow')).toBe(1);
      expect(h.runs('other')).toBe(0);
      const replay = await rawJson(h.http().post('/slow').set('Idempotency-Key', key), '{"amount":1}');
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(done.text);
    });
  });
});
