// Issue 14: every line of the library goes through Nest's Logger under a stable context ('Idempotency', 'Workflows'),
// and `logLevel` filters the library's own lines, never the app's. Seen through a custom LoggerService.
import { Injectable, Logger, LoggerService, OnModuleInit } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { IdempotencyConfigError, IdempotencyModule, IdempotencyModuleOptions } from '../../lib';
import { startConfiguredApp } from '../support/configured-app';
import { createEngineContext, databaseUrl, sql, uniqueSchema } from '../support/test-app';

jest.setTimeout(60_000);

type Line = { level: string; message: string; context?: string };

/** Records every line with its level and context, as an app's own logger would receive it. */
class RecordingLogger implements LoggerService {
  readonly lines: Line[] = [];
  private add(level: string, message: unknown, rest: unknown[]) {
    const context = rest.length > 0 && typeof rest[rest.length - 1] === 'string' ? (rest[rest.length - 1] as string) : undefined;
    this.lines.push({ level, message: String(message), context });
  }
  log(message: unknown, ...rest: unknown[]) { this.add('log', message, rest); }
  warn(message: unknown, ...rest: unknown[]) { this.add('warn', message, rest); }
  error(message: unknown, ...rest: unknown[]) { this.add('error', message, rest); }
  debug(message: unknown, ...rest: unknown[]) { this.add('debug', message, rest); }
  verbose(message: unknown, ...rest: unknown[]) { this.add('verbose', message, rest); }
  fatal(message: unknown, ...rest: unknown[]) { this.add('fatal', message, rest); }
}

/** The app's own lines, at every level: the library's logLevel must leave them alone. */
@Injectable()
class AppLines implements OnModuleInit {
  private readonly logger = new Logger('App');
  onModuleInit() {
    this.logger.debug('app debug line');
    this.logger.log('app log line');
  }
}

/** Starts an app whose library logs a `log` line (console mounted) and a `warn` line (no http.scope), returns every line. */
async function linesWith(logLevel: IdempotencyModuleOptions['logLevel']): Promise<Line[]> {
  const logger = new RecordingLogger();
  const started = await startConfiguredApp({
    adapter: 'express',
    controllers: [],
    providers: [AppLines],
    options: { console: { allowUnguarded: true }, ...(logLevel === undefined ? {} : { logLevel }) },
    logger,
  });
  await started.close();
  return logger.lines;
}

const library = (lines: Line[]) => lines.filter((l) => l.context === 'Idempotency' || l.context === 'Workflows');
const levelsOf = (lines: Line[]) => new Set(library(lines).map((l) => l.level));
const appLines = (lines: Line[]) => lines.filter((l) => l.context === 'App').map((l) => l.level).sort();

describe('logLevel', () => {
  it("by default ('log') the library's log and warn lines reach the app's logger under the context 'Idempotency'", async () => {
    const lines = await linesWith(undefined);
    expect(library(lines)).toEqual(expect.arrayContaining([
      { level: 'log', message: expect.stringContaining('console mounted at /_idempotency') as string, context: 'Idempotency' },
      { level: 'warn', message: expect.stringContaining('http.scope is not set') as string, context: 'Idempotency' },
    ]));
    expect(levelsOf(lines).has('debug')).toBe(false);
    expect(appLines(lines)).toEqual(['debug', 'log']);
  });

  it("'warn' drops the library's log lines and keeps its warnings; the app's debug and log lines stay", async () => {
    const lines = await linesWith('warn');
    expect(library(lines).some((l) => l.message.includes('http.scope is not set'))).toBe(true);
    expect(library(lines).some((l) => l.message.includes('console mounted'))).toBe(false);
    expect([...levelsOf(lines)]).toEqual(['warn']);
    expect(appLines(lines)).toEqual(['debug', 'log']);
  });

  it("'debug' adds the library's debug lines (here: no OpenTelemetry provider registered, so nothing is recorded)", async () => {
    const lines = await linesWith('debug');
    expect(library(lines)).toEqual(expect.arrayContaining([
      { level: 'debug', message: expect.stringContaining('observability: no OpenTelemetry MeterProvider or TracerProvider registered yet') as string, context: 'Idempotency' },
      { level: 'log', message: expect.stringContaining('console mounted') as string, context: 'Idempotency' },
    ]));
  });

  it("'error' and false drop both; the app's lines stay", async () => {
    for (const level of ['error', false] as const) {
      const lines = await linesWith(level);
      expect(library(lines)).toEqual([]);
      expect(appLines(lines)).toEqual(['debug', 'log']);
    }
  });

  it('says nothing of http.scope in a standalone application context (a worker): it serves no requests to scope', async () => {
    const logger = new RecordingLogger();
    const schema = uniqueSchema('lls');
    try {
      const worker = await createEngineContext(schema, { redis: false }, { logger });
      await worker.close();
    } finally {
      await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    }
    expect(library(logger.lines).filter((l) => l.level === 'warn')).toEqual([]);
  });

  it('refuses an unknown level at startup, naming the option and the values it takes', async () => {
    const attempt = Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ postgres: { url: databaseUrl() }, redis: false, logLevel: 'info' as never })],
    }).compile();
    await expect(attempt).rejects.toThrow(IdempotencyConfigError);
    await expect(attempt).rejects.toThrow(/logLevel: expected one of 'verbose', 'debug', 'log', 'warn', 'error', 'fatal' .* or false .*got "info"/);
  });
});
