/// <reference lib="dom" />
// Issue 14: one execution's page shows its events (setEvent keys and values), its messages (topic, delivered or
// pending, when sent) and its durable waits, in headless Chromium; `IdempotencyConsole.showWorkflow` and the CLI's
// `workflows show` return the same.
import { INestApplication } from '@nestjs/common';
import type { Browser, Page } from 'puppeteer-core';
import { IdempotencyConsole, recv, setEvent, Step, Workflow, WorkflowClient } from '../../lib';
import { consoleCommand } from '../../lib/cli/console-command';
import { listen, waitUntil } from '../support/resilience';
import { createTestApp, databaseUrl, sql, uniqueSchema } from '../support/test-app';
import { FAST, uniquePrefix } from '../workflow/support';
import { launchBrowser } from './browser';

jest.setTimeout(120_000);

@Workflow({ name: 'order' })
class OrderWorkflow {
  async run(): Promise<string> {
    await setEvent('status', 'awaiting-payment');
    await setEvent('carrier', { name: 'DHL' });
    const paid = await recv<{ amount: number }>('payment');
    await setEvent('status', 'paid');
    await recv('shipped'); // waits for a message that the test does not send
    return this.ship(paid?.amount ?? 0);
  }

  @Step()
  ship(amount: number): Promise<string> {
    return Promise.resolve(`shipped ${amount}`);
  }
}

describe('console: events, messages and waits of an execution', () => {
  const schema = uniqueSchema('act');
  let app: INestApplication;
  let url: string;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    app = await createTestApp({
      adapter: 'express', schema, controllers: [], providers: [OrderWorkflow],
      options: { workflows: { ...FAST, queuePrefix: uniquePrefix() }, console: { allowUnguarded: true } },
    });
    url = `${await listen(app)}/_idempotency`;
    browser = await launchBrowser();
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 800 });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  const cells = (selector: string) => page.$$eval(selector, (rows) => rows.map((r) => (r as HTMLElement).innerText.trim().split('\t').map((c) => c.trim())));

  it('shows them on the execution page, in the injectable API and in the CLI', async () => {
    const client = app.get(WorkflowClient);
    const handle = await client.start(OrderWorkflow, undefined, { workflowId: 'order-1' });
    await client.send('order-1', { amount: 42 }, { topic: 'payment' });
    await client.send('order-1', { note: 'early' }, { topic: 'gift-wrap' }); // never received: stays pending
    await waitUntil('the order waits for its shipment message', async () => (await client.getEvent('order-1', 'status')) === 'paid');

    await page.goto(`${url}/workflows/${handle.executionId}`);
    const events = await cells('#events tbody tr');
    expect(events.map((e) => e.slice(0, 2))).toEqual([['carrier', expect.stringContaining('"DHL"') as string], ['status', '"paid"']]);
    expect(events[1][2]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/);
    const messages = await cells('#messages tbody tr');
    expect(messages.map((m) => [m[0], m[1]])).toEqual([['payment', 'delivered'], ['gift-wrap', 'pending']]);
    expect(messages[0][4]).toContain('42');
    expect(messages[0][2]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/);
    const waits = await cells('#waits tbody tr');
    expect(waits.map((w) => [w[1], w[3]])).toEqual([['recv (message)', 'fired'], ['recv (message)', 'waiting']]);
    expect(waits[1][2]).toBe('on a message only');
    await page.setViewport({ width: 390, height: 844 }); // a phone: no horizontal overflow
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);

    const shown = await app.get(IdempotencyConsole).showWorkflow(handle.executionId);
    expect(shown?.events.map((e) => e.key)).toEqual(['carrier', 'status']);
    expect(shown?.messages.map((m) => m.status)).toEqual(['delivered', 'pending']);

    const printed = await consoleCommand(['workflows', 'show', handle.executionId], { ...process.env, DATABASE_URL: databaseUrl(), IDEMPOTENCY_SCHEMA: schema });
    expect(printed.code).toBe(0);
    const json = JSON.parse(printed.out.join('\n')) as { events: Array<{ key: string; value: unknown }>; messages: Array<{ topic: string; status: string }>; waits: unknown[] };
    expect(json.events).toEqual([expect.objectContaining({ key: 'carrier', value: { name: 'DHL' } }), expect.objectContaining({ key: 'status', value: 'paid' })]);
    expect(json.messages.map((m) => [m.topic, m.status])).toEqual([['payment', 'delivered'], ['gift-wrap', 'pending']]);
    expect(json.waits).toHaveLength(2);
  });
});
