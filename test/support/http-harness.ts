import { INestApplication, Injectable, ModuleMetadata, Type } from '@nestjs/common';
import type { Server } from 'node:http';
import { AddressInfo } from 'node:net';
import request, { Response } from 'supertest';
import { IdempotencyModuleOptions } from '../../lib';
import { AdapterName, createTestApp, sql, TestAppOptions, uniqueSchema } from './test-app';

/** Counts handler runs by name; one instance per app, so Express and Fastify apps never share counts. */
@Injectable()
export class Runs {
  private readonly counts = new Map<string, number>();

  inc(name: string): number {
    const n = (this.counts.get(name) ?? 0) + 1;
    this.counts.set(name, n);
    return n;
  }

  get(name: string): number {
    return this.counts.get(name) ?? 0;
  }
}

/** Lets a test hold a handler in flight: the handler awaits `pass()`, the test awaits `started` and calls `open()`. */
@Injectable()
export class Gate {
  private startedResolve!: () => void;
  private openResolve!: () => void;
  started!: Promise<void>;
  private opened!: Promise<void>;

  constructor() {
    this.reset();
  }

  reset(): void {
    this.started = new Promise((resolve) => (this.startedResolve = resolve));
    this.opened = new Promise((resolve) => (this.openResolve = resolve));
  }

  async pass(): Promise<void> {
    this.startedResolve();
    await this.opened;
  }

  open(): void {
    this.openResolve();
  }
}

/** A row of the records table, as the tests look at it. */
export interface RecordRow {
  id: string;
  scope: string;
  key: string;
  fingerprint: string;
  status: string;
  attempts: number;
  result: unknown;
  expires_at: Date;
}

export interface Harness {
  app: INestApplication;
  schema: string;
  url: string;
  /** A supertest client bound to the listening app. */
  http(): ReturnType<typeof request>;
  runs(name: string): number;
  gate: Gate;
  /** Rows of the records table, optionally for one key, oldest first. */
  records(key?: string): Promise<RecordRow[]>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  adapter: AdapterName;
  controllers: Type<unknown>[];
  providers?: ModuleMetadata['providers'];
  options?: Partial<IdempotencyModuleOptions>;
  importsBefore?: TestAppOptions['importsBefore'];
  importsAfter?: TestAppOptions['importsAfter'];
  configure?: TestAppOptions['configure'];
}

/** Builds the app (own schema, own Redis prefix), listens on an ephemeral port and returns helpers around it. */
export async function startApp(config: HarnessOptions): Promise<Harness> {
  const schema = uniqueSchema('h');
  const app = await createTestApp({
    adapter: config.adapter,
    controllers: config.controllers,
    providers: [Runs, Gate, ...(config.providers ?? [])],
    options: config.options,
    schema,
    importsBefore: config.importsBefore,
    importsAfter: config.importsAfter,
    configure: config.configure,
  });
  await app.listen(0, '127.0.0.1');
  const server = app.getHttpServer() as Server;
  const address = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${address.port}`;
  const runs = app.get(Runs);
  return {
    app,
    schema,
    url,
    http: () => request(url),
    runs: (name) => runs.get(name),
    gate: app.get(Gate),
    records: (key) => sql<RecordRow>(
      `SELECT id::text, scope, key, fingerprint, status, attempts, result, expires_at
         FROM "${schema}".idempotency_records ${key === undefined ? '' : 'WHERE key = $1'} ORDER BY id`,
      key === undefined ? [] : [key],
    ),
    close: async () => {
      await app.close();
      await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
  };
}

/** Asserts an RFC 9457 problem response with the given status and returns its body. */
export function expectProblem(res: Response, status: number): { type: string; title: string; status: number; detail: string } {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = JSON.parse(res.text) as { type: string; title: string; status: number; detail: string };
  expect(typeof body.type).toBe('string');
  expect(body.type.length).toBeGreaterThan(0);
  expect(typeof body.title).toBe('string');
  expect(body.title.length).toBeGreaterThan(0);
  expect(body.status).toBe(status);
  expect(typeof body.detail).toBe('string');
  return body;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Sends a raw JSON text (not re-serialized by supertest). */
export function rawJson(test: request.Test, text: string): request.Test {
  return test.set('Content-Type', 'application/json').send(text);
}
