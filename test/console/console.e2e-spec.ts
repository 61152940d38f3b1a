/// <reference lib="dom" />
// Issue 14: the web console in a real browser (headless Chromium from Debian's package, driven by puppeteer-core):
// list and filter executions, open one and see its steps, cancel a running one, resume a failed one, release a stuck
// key, no horizontal overflow on a phone-sized viewport; the guard refuses an unauthenticated request.
import { CanActivate, ExecutionContext, INestApplication, Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Browser, Page } from 'puppeteer-core';
import { IdempotencyConfigError, IdempotencyModule, IdempotencyService, Step, Workflow, WorkflowClient } from '../../lib';
import { gate, listen, waitUntil } from '../support/resilience';
import { createTestApp, databaseUrl, sql, uniqueSchema } from '../support/test-app';
import { FAST, uniquePrefix } from '../workflow/support';
import { launchBrowser } from './browser';

jest.setTimeout(120_000);

const TOKEN = 'demo-token';

@Injectable()
class TokenGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const headers = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers;
    return headers['x-console-token'] === TOKEN;
  }
}

const hold = gate();
let failPayment = true;

@Workflow({ name: 'shipment' })
class ShipmentWorkflow {
  async run(input: { wait: boolean }): Promise<string> {
    const label = await this.label();
    if (input.wait) await this.waitForCarrier();
    return label;
  }

  @Step()
  label(): Promise<string> {
    return Promise.resolve('label-1');
  }

  @Step()
  async waitForCarrier(): Promise<void> {
    await hold.promise;
  }
}

@Workflow({ name: 'payment' })
class PaymentWorkflow {
  run(): Promise<string> {
    return this.charge();
  }

  @Step({ attempts: 1 })
  charge(): Promise<string> {
    return failPayment ? Promise.reject(new Error('card declined')) : Promise.resolve('charged');
  }
}

describe('web console (headless Chromium)', () => {
  const schema = uniqueSchema('cons');
  let app: INestApplication;
  let url: string;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    app = await createTestApp({
      adapter: 'express', schema, controllers: [], providers: [ShipmentWorkflow, PaymentWorkflow, TokenGuard],
      options: { workflows: { ...FAST, queuePrefix: uniquePrefix() }, console: { path: '/_idempotency', guard: TokenGuard } },
    });
    url = `${await listen(app)}/_idempotency`;
    browser = await launchBrowser();
    page = await browser.newPage();
    await page.setExtraHTTPHeaders({ 'x-console-token': TOKEN });
  });

  afterAll(async () => {
    hold.open();
    await browser?.close();
    await app?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  const cells = (selector: string) => page.$$eval(selector, (rows) => rows.map((r) => (r as HTMLElement).innerText.trim()));
  const statusOnPage = () => page.$eval('#status', (e) => (e as HTMLElement).innerText.trim());

  it('refuses a request without the guard\'s token, and refuses to start without a guard', async () => {
    expect((await fetch(url)).status).toBe(403);
    expect((await fetch(`${url}/keys/release?scope=x&key=y`, { method: 'POST' })).status).toBe(403);
    await expect(
      Test.createTestingModule({
        imports: [IdempotencyModule.forRoot({ postgres: { url: databaseUrl(), schema }, redis: false, console: { path: '/ops' } })],
      }).compile().then((m) => m.createNestApplication().init()),
    ).rejects.toThrow(IdempotencyConfigError);
  });

  it('lists and filters executions, shows one with its steps, cancels a running one and resumes a failed one', async () => {
    const client = app.get(WorkflowClient);
    const done = await client.start(ShipmentWorkflow, { wait: false }, { workflowId: 'ship-done' });
    await done.result({ timeout: 30_000 });
    await client.start(ShipmentWorkflow, { wait: true }, { workflowId: 'ship-running' });
    const failing = await client.start(PaymentWorkflow, undefined, { workflowId: 'pay-failing' });
    await expect(failing.result({ timeout: 30_000 })).rejects.toThrow();
    await waitUntil('the shipment waits for its carrier', async () => (await client.steps((await client.getHandle('ship-running')).executionId)).length === 1);

    await page.goto(url);
    expect((await cells('#workflows tbody tr')).map((r) => r.split('\t')[0]).sort()).toEqual(['pay-failing', 'ship-done', 'ship-running']);
    await page.select('select[name=status]', 'failed');
    await Promise.all([page.waitForNavigation(), page.click('form.filters button')]);
    expect((await cells('#workflows tbody tr')).map((r) => r.split('\t')[0])).toEqual(['pay-failing']);

    await page.goto(url);
    await Promise.all([page.waitForNavigation(), page.click('a::-p-text(ship-done)')]);
    expect(await statusOnPage()).toBe('completed');
    expect((await cells('#steps tbody tr')).map((r) => r.split('\t').slice(1, 3))).toEqual([['label', 'completed']]);

    await page.goto(url);
    await Promise.all([page.waitForNavigation(), page.click('a::-p-text(ship-running)')]);
    expect(await statusOnPage()).toBe('running');
    await Promise.all([page.waitForNavigation(), page.click('#cancel')]);
    expect(await page.$eval('.note', (e) => (e as HTMLElement).innerText)).toContain('cancelled');
    expect(await statusOnPage()).toBe('cancelled');
    hold.open();

    failPayment = false;
    await page.goto(url);
    await Promise.all([page.waitForNavigation(), page.click('a::-p-text(pay-failing)')]);
    expect(await statusOnPage()).toBe('failed');
    expect(await page.$eval('#steps details.error summary', (e) => (e).innerText)).toContain('card declined');
    await Promise.all([page.waitForNavigation(), page.click('#resume')]);
    await waitUntil('the resumed payment completes', async () => {
      await page.reload();
      return (await statusOnPage()) === 'completed';
    });
  });

  it('looks up a stuck key and releases it', async () => {
    const engine = app.get(IdempotencyService);
    const stuck = await engine.begin({ scope: 'http:tenant-1', key: 'order-7', fingerprint: 'f', leaseMs: 600_000, ttlMs: 600_000 });
    expect(stuck.kind).toBe('acquired');
    await page.goto(`${url}/keys`);
    await page.type('input[name=scope]', 'http:tenant-1');
    await page.type('input[name=key]', 'order-7');
    await Promise.all([page.waitForNavigation(), page.click('form.lookup button')]);
    expect((await cells('#records tbody tr'))[0]).toMatch(/^in_progress\theld until/);
    await Promise.all([page.waitForNavigation(), page.click('#release')]);
    expect(await page.$eval('.note', (e) => (e as HTMLElement).innerText)).toContain('released');
    expect((await cells('#records tbody tr'))[0]).toMatch(/^failed/);
    expect((await engine.begin({ scope: 'http:tenant-1', key: 'order-7', fingerprint: 'f', leaseMs: 1000, ttlMs: 1000 })).kind).toBe('acquired');
  });

  it('fits a phone-sized viewport without horizontal overflow', async () => {
    await page.setViewport({ width: 390, height: 844 });
    for (const path of ['', '/keys?scope=http:tenant-1&key=order-7']) {
      await page.goto(`${url}${path}`);
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    }
    await page.goto(url);
    await Promise.all([page.waitForNavigation(), page.click('a::-p-text(pay-failing)')]);
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
  });
});
