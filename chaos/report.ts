// The chaos run's one table: counts, and invariants that say what they must be and whether they held.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ReportRow {
  scenario: string;
  metric: string;
  value: number | string;
  /** For an invariant: what the value must be ("= 0", "= 100%"). */
  must?: string;
  ok?: boolean;
  /** Up to a few keys or executions that broke the invariant, to start the investigation. */
  examples?: string[];
}

export class Report {
  readonly rows: ReportRow[] = [];

  count(scenario: string, metric: string, value: number | string): void {
    this.rows.push({ scenario, metric, value });
  }

  /** An invariant: `failing` lists what broke it (empty when it held). */
  mustBeZero(scenario: string, metric: string, failing: string[]): void {
    this.rows.push({ scenario, metric, value: failing.length, must: '= 0', ok: failing.length === 0, examples: failing.slice(0, 5) });
  }

  mustHold(scenario: string, metric: string, value: number | string, must: string, ok: boolean): void {
    this.rows.push({ scenario, metric, value, must, ok });
  }

  get failed(): ReportRow[] {
    return this.rows.filter((r) => r.ok === false);
  }

  /** The table as Markdown (it goes into the README as it is). */
  table(): string {
    const lines = ['| scenario | measure | value | must be | |', '|---|---|---:|---|---|'];
    for (const r of this.rows) {
      const verdict = r.ok === undefined ? '' : r.ok ? 'ok' : '**FAILED**';
      lines.push(`| ${r.scenario} | ${r.metric} | ${r.value} | ${r.must ?? ''} | ${verdict} |`);
    }
    return lines.join('\n');
  }

  /** Writes the report (with the configuration and fault log) to `<dir>/chaos-<time>.json` and `<dir>/latest.json`. */
  write(dir: string, extra: Record<string, unknown>): string {
    mkdirSync(dir, { recursive: true });
    const json = JSON.stringify({ ...extra, rows: this.rows, failed: this.failed.length }, null, 2);
    const file = join(dir, `chaos-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, json);
    writeFileSync(join(dir, 'latest.json'), json);
    return file;
  }
}
