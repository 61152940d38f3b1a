// Issue 14: the console mounts on Fastify as on Express: the guard refuses, pages render, the release form's POST
// (text/plain, which Fastify parses without a plugin) releases a stuck key.
import { CanActivate, ExecutionContext, INestApplication, Injectable } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyService } from '../../lib';
import { createTestApp } from '../support/test-app';
import { listen } from '../support/resilience';

@Injectable()
class HeaderGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers['x-admin'] === 'yes';
  }
}

describe('web console on Fastify', () => {
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    app = await createTestApp({
      adapter: 'fastify',
      controllers: [],
      providers: [HeaderGuard],
      options: { console: { path: '/ops/console', guard: HeaderGuard } },
    });
    url = await listen(app);
  });

  afterAll(() => app?.close());

  it('guards, renders and releases', async () => {
    expect((await request(url).get('/ops/console')).status).toBe(403);
    const list = await request(url).get('/ops/console').set('x-admin', 'yes');
    expect(list.status).toBe(200);
    expect(list.headers['content-type']).toMatch(/^text\/html/);
    expect(list.text).toContain('<table id="workflows">');

    const engine = app.get(IdempotencyService);
    expect((await engine.begin({ scope: 'http:', key: 'stuck', fingerprint: 'f', leaseMs: 600_000, ttlMs: 600_000 })).kind).toBe('acquired');
    const released = await request(url).post('/ops/console/keys/release?scope=http%3A&key=stuck').set('x-admin', 'yes').set('content-type', 'text/plain').send('');
    expect(released.status).toBe(303);
    expect(released.headers.location).toContain('note=released');
    expect((await engine.begin({ scope: 'http:', key: 'stuck', fingerprint: 'f', leaseMs: 1000, ttlMs: 1000 })).kind).toBe('acquired');
  });
});
