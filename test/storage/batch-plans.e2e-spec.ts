import { INestApplication } from '@nestjs/common';
import { Client } from 'pg';
import { outboxSql } from '../../lib/outbox/outbox.sql';
import { idempotencySql } from '../../lib/storage/postgres/idempotency.sql';
import { workflowSql } from '../../lib/workflow/storage/workflow.sql';
import { createTestApp, databaseUrl, uniqueSchema } from '../support/test-app';

jest.setTimeout(60_000);

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}

/** A plan's nodes, depth first. */
function nodesOf(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)];
}

function scansOf(plan: PlanNode, table: string): string[] {
  return nodesOf(plan).filter((node) => node['Relation Name'] === table).map((node) => node['Node Type']);
}

function wholeTableScans(plan: PlanNode): string[] {
  return nodesOf(plan).filter((node) => node['Node Type'] === 'Seq Scan').map((node) => node['Relation Name'] ?? '?');
}

/** Statements that read every row by design: the outbox's counts and the console's filtered listing. */
const SCANS_BY_DESIGN = new Set(['outbox_stats', 'outbox_list']);

/** Every statement of the records, workflow and outbox tables, by name. */
function statementsOf(schema: string): [string, string][] {
  const named = [
    ...Object.entries(idempotencySql(schema)).map(([name, statement]) => [`records_${name}`, statement] as const),
    ...Object.entries(workflowSql(schema)).map(([name, statement]) => [`workflow_${name}`, statement] as const),
    ...Object.entries(outboxSql(schema, true)).map(([name, text]) => [`outbox_${name}`, { text }] as const),
  ];
  return named.filter(([name]) => !SCANS_BY_DESIGN.has(name)).flatMap(([name, statement]) => {
    const text = (statement as { text?: unknown }).text;
    return typeof text === 'string' && /\b(SELECT|UPDATE|INSERT|DELETE)\b/.test(text) ? [[name, text] as [string, string]] : [];
  });
}

// A prepared statement keeps the plan Postgres made for it while the records table was new (no statistics yet) until
// autovacuum's first ANALYZE. The statements that look keys up by the batch must use the key index even in that plan:
// a scan of the whole table for every key cost 20–30 ms per statement once it held a few thousand rows.
describe('Statements find their rows through an index, even in a plan made on a new table', () => {
  const schema = uniqueSchema('plans');
  const table = 'idempotency_records';
  const statements = idempotencySql(schema);
  let app: INestApplication;
  let client: Client;

  beforeAll(async () => {
    app = await createTestApp({ adapter: 'express', schema, controllers: [], options: { redis: false } });
    client = new Client({ connectionString: databaseUrl() });
    await client.connect();
    // The plan a prepared statement may keep for good, made now, on a table without statistics.
    await client.query('SET plan_cache_mode = force_generic_plan');
    const [{ analyzed }] = (await client.query<{ analyzed: boolean }>(
      `SELECT reltuples >= 0 AS analyzed FROM pg_class WHERE oid = '"${schema}".${table}'::regclass`,
    )).rows;
    expect(analyzed).toBe(false);
  });
  afterAll(async () => {
    await client?.end();
    await app?.close();
  });

  /** The plan of `text` prepared as `name` (with `types`, if given) and executed with `values` (none: no parentheses). */
  async function planOf(name: string, text: string, types: string | undefined, values: string): Promise<PlanNode> {
    await client.query(`PREPARE ${name}${types === undefined ? '' : `(${types})`} AS ${text}`);
    const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      `EXPLAIN (FORMAT JSON) EXECUTE ${name}${values === '' ? '' : `(${values})`}`,
    );
    return rows[0]['QUERY PLAN'][0].Plan;
  }

  async function scans(name: string, text: string, types: string, values: string): Promise<string[]> {
    return scansOf(await planOf(name, text, types, values), table);
  }

  it('the reads of a turn (findBatch)', async () => {
    const found = await scans('plan_find_batch', statements.findBatch.text, 'text[], text[]', `ARRAY['s','s'], ARRAY['k1','k2']`);
    expect(found.length).toBeGreaterThan(0);
    expect(found.every((scan) => scan === 'Index Scan')).toBe(true);
  });

  it('the claims of a turn (claimBatch): its look-up of live records', async () => {
    const found = await scans(
      'plan_claim_batch', statements.claimBatch.text, 'text[], text[], text[], uuid[], bigint[], bigint[]',
      `ARRAY['s'], ARRAY['k'], ARRAY['f'], ARRAY['00000000-0000-4000-8000-000000000000'::uuid], ARRAY[1000::bigint], ARRAY[1000::bigint]`,
    );
    // The insert itself is a ModifyTable node on the table; the look-up is the only scan of it.
    expect(found.filter((scan) => scan !== 'ModifyTable')).toEqual(['Index Scan']);
  });

  // Each batch (completions, workflow starts, task attempts, step checkpoints, outbox deliveries and failures) joins
  // its unnest with a table: in a plan made before the table had statistics, a join scanned the whole table once per
  // statement until autovacuum's first ANALYZE. The read of a waited-for failure had no index at all.
  it.each(statementsOf(schema))('%s scans no table whole', async (name, text) => {
    const params = Math.max(0, ...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
    const plan = await planOf(`plan_all_${name}`, text, undefined, Array(params).fill('NULL').join(', '));
    expect(wholeTableScans(plan)).toEqual([]);
  });
});
