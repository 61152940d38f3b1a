import { pendingMigrations, runMigrations, withMigrationConnection } from '../storage/postgres/schema-migrator';

/** What the command printed and its exit code (0 done or up to date, 1 `--check` found pending migrations, 2 usage error; the bin exits 3 when it throws). */
export interface CommandResult {
  code: number;
  out: string[];
  err: string[];
}

export const USAGE = `Usage: nestjs-idempotency migrate [--check] [--url <postgres-url>] [--schema <name>]

  migrate          apply the library's pending migrations (one transaction, safe to run from several places at once)
  migrate --check  apply nothing; exit 1 and list the pending migrations if any
  --url            Postgres URL (default: $DATABASE_URL)
  --schema         schema of the library's tables (default: $IDEMPOTENCY_SCHEMA, else public)`;

interface Parsed {
  check: boolean;
  url?: string;
  schema?: string;
}

function parse(args: string[]): Parsed | string {
  const [command, ...rest] = args;
  if (command !== 'migrate') return command === undefined ? 'a command is required' : `unknown command "${command}"`;
  const parsed: Parsed = { check: false };
  for (let i = 0; i < rest.length; i++) {
    const [flag, inline] = rest[i].split(/=(.*)/s, 2);
    if (flag === '--check') {
      parsed.check = true;
      continue;
    }
    if (flag !== '--url' && flag !== '--schema') return `unknown option "${rest[i]}"`;
    const value = inline ?? rest[++i];
    if (value === undefined || value === '') return `${flag} needs a value`;
    parsed[flag === '--url' ? 'url' : 'schema'] = value;
  }
  return parsed;
}

/** `nestjs-idempotency migrate [--check]`: runs or verifies the library's migrations, for deploy pipelines. */
export async function migrateCommand(args: string[], env: NodeJS.ProcessEnv): Promise<CommandResult> {
  if (args.includes('--help') || args.includes('-h')) return { code: 0, out: [USAGE], err: [] };
  const parsed = parse(args);
  if (typeof parsed === 'string') return { code: 2, out: [], err: [`nestjs-idempotency: ${parsed}`, USAGE] };
  const url = parsed.url ?? env.DATABASE_URL;
  if (!url || !/^postgres(ql)?:\/\//.test(url)) {
    return { code: 2, out: [], err: ['nestjs-idempotency: give the database as --url postgres://… or in DATABASE_URL', USAGE] };
  }
  const schema = parsed.schema ?? env.IDEMPOTENCY_SCHEMA ?? 'public';
  return withMigrationConnection({ type: 'postgres', url }, schema, async (dataSource) => {
    if (parsed.check) {
      const pending = await pendingMigrations(dataSource, schema);
      if (pending.length === 0) return { code: 0, out: [`schema "${schema}" is up to date`], err: [] };
      return { code: 1, out: [], err: [`schema "${schema}" lacks ${pending.length} migration(s): ${pending.join(', ')}`] };
    }
    const { applied } = await runMigrations(dataSource, schema);
    const out = applied.length === 0 ? [`schema "${schema}" is up to date`] : [`applied to schema "${schema}": ${applied.join(', ')}`];
    return { code: 0, out, err: [] };
  });
}
