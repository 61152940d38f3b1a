import { Body, Controller, INestApplication, Injectable, Module, Post } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import Redis from 'ioredis';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { IdempotencyModule, IdempotencyModuleOptions, IdempotencyService } from '../../lib';
import { databaseUrl, redisUrl, sql, uniqueSchema } from '../support/test-app';

let runs = 0;
@Controller()
class ChargeController {
  @Post('charge')
  charge(@Body() body: { amount: number }) {
    runs++;
    return { run: runs, amount: body.amount };
  }
}

async function boot(imports: unknown[]): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports: imports as never[], controllers: [ChargeController] }).compile();
  const app = moduleRef.createNestApplication();
  app.useLogger(false);
  await app.init();
  return app;
}

async function expectReplay(app: INestApplication, key: string): Promise<void> {
  const before = runs;
  const first = await request(app.getHttpServer()).post('/charge').set('Idempotency-Key', key).send({ amount: 3 });
  const second = await request(app.getHttpServer()).post('/charge').set('Idempotency-Key', key).send({ amount: 3 });
  expect(first.status).toBe(201);
  expect(second.status).toBe(201);
  expect(second.text).toBe(first.text);
  expect(second.headers['idempotent-replayed']).toBe('true');
  expect(runs).toBe(before + 1);
}

describe('module setup', () => {
  it('forRootAsync with ConfigModule and useFactory', async () => {
    const schema = uniqueSchema();
    const app = await boot([
      ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => ({ DB: databaseUrl(), REDIS: redisUrl() })] }),
      IdempotencyModule.forRootAsync({
        imports: [ConfigModule],
        inject: [ConfigService],
        useFactory: (config: ConfigService) => ({
          postgres: { url: config.getOrThrow<string>('DB'), schema },
          redis: { url: config.getOrThrow<string>('REDIS') },
          migrationsRun: true,
        }),
      }),
    ]);
    try {
      await expectReplay(app, 'factory-1');
      const rows = await sql(`SELECT status FROM "${schema}".idempotency_records WHERE key = 'factory-1'`);
      expect(rows).toEqual([{ status: 'completed' }]);
    } finally {
      await app.close();
    }
  });

  it('forRootAsync with useClass', async () => {
    const schema = uniqueSchema();
    @Injectable()
    class OptionsFactory {
      createIdempotencyOptions(): IdempotencyModuleOptions {
        return { postgres: { url: databaseUrl(), schema }, redis: false, migrationsRun: true };
      }
    }
    const app = await boot([IdempotencyModule.forRootAsync({ useClass: OptionsFactory })]);
    try {
      await expectReplay(app, 'class-1');
    } finally {
      await app.close();
    }
  });

  it('reuses the app TypeORM DataSource by name and an existing ioredis client, and leaves both open on shutdown', async () => {
    const schema = uniqueSchema();
    const client = new Redis(redisUrl());
    @Module({})
    class Empty {}
    const app = await boot([
      Empty,
      TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl(), entities: [] }),
      IdempotencyModule.forRoot({ postgres: { dataSource: 'default', schema }, redis: { client, keyPrefix: schema }, migrationsRun: true }),
    ]);
    const dataSource = app.get(DataSource);
    try {
      await expectReplay(app, 'reuse-1');
      expect(await client.exists(`${schema}:{5:http:|reuse-1}:r`)).toBe(1);
    } finally {
      await app.close();
    }
    expect(client.status).toBe('ready');
    await client.quit();
    expect(dataSource.isInitialized).toBe(false); // closed by TypeOrmModule, its owner
  });

  it('connects with plain ioredis options ({ host, port })', async () => {
    const schema = uniqueSchema();
    const { hostname, port } = new URL(redisUrl());
    const app = await boot([
      IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema }, redis: { host: hostname, port: Number(port), keyPrefix: schema }, migrationsRun: true }),
    ]);
    const probe = new Redis(redisUrl());
    try {
      await expectReplay(app, 'ioredis-options-1');
      expect(await probe.exists(`${schema}:{5:http:|ioredis-options-1}:r`)).toBe(1);
    } finally {
      probe.disconnect();
      await app.close();
    }
  });

  it('reports an unknown DataSource name at bootstrap', async () => {
    await expect(
      boot([IdempotencyModule.forRoot({ postgres: { dataSource: 'missing' }, redis: false })]),
    ).rejects.toThrow(/postgres\.dataSource: no TypeORM DataSource named "missing"/);
  });

  it('exposes the engine as an injectable service', async () => {
    const schema = uniqueSchema();
    const app = await boot([IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema }, redis: false, migrationsRun: true })]);
    try {
      const engine = app.get(IdempotencyService);
      const request1 = { scope: 'svc', key: 'k', fingerprint: 'f', leaseMs: 10_000, ttlMs: 60_000 };
      const begun = await engine.begin(request1);
      expect(begun.kind).toBe('acquired');
      if (begun.kind !== 'acquired') return;
      expect(await engine.begin(request1)).toMatchObject({ kind: 'in_progress' });
      expect(await engine.complete(begun.claim, { ok: true })).toBe(true);
      expect(await engine.begin(request1)).toMatchObject({ kind: 'replay', record: { result: { ok: true } } });
      expect(await engine.begin({ ...request1, fingerprint: 'other' })).toEqual({ kind: 'mismatch' });
    } finally {
      await app.close();
    }
  });
});
