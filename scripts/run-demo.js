'use strict';
// `npm run demo`: starts Postgres and Redis (unless DATABASE_URL / REDIS_URL are set), runs the
// sample app (sample-app/) and walks through the Idempotency-Key behaviour with a scripted client.
// Set DEMO_VERBOSE=1 to see the app's own log as it runs.
const { spawn } = require('node:child_process');
const { randomUUID } = require('node:crypto');
const path = require('node:path');
const { ensureServices, freePort, stop, ROOT } = require('./services');

const CONCURRENT = 20;
const STARTUP_TIMEOUT_MS = 90000;
const verbose = process.env.DEMO_VERBOSE === '1';

class DemoFailure extends Error {}

function check(condition, message) {
  if (!condition) throw new DemoFailure(message);
}

const out = (line = '') => process.stdout.write(`${line}\n`);
const indent = (text, pad = '      ') => text.split('\n').map((l) => pad + l).join('\n');
const newKey = (label) => `demo-${label}-${randomUUID()}`;

// The sample app authenticates every API call with a bearer token and scopes Idempotency-Keys to that client.
const CLIENT_A = { id: 'shop-a', token: `demo-a-${randomUUID()}` };
const CLIENT_B = { id: 'shop-b', token: `demo-b-${randomUUID()}` };
const API_TOKENS = `${CLIENT_A.token}=${CLIENT_A.id},${CLIENT_B.token}=${CLIENT_B.id}`;
const auth = (client = CLIENT_A) => ({ Authorization: `Bearer ${client.token}` });

/** Starts the sample app on a free port (see waitForApp). */
async function startApp(env) {
  const port = await freePort();
  const logs = [];
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', path.join('sample-app', 'main.ts')], {
    cwd: ROOT,
    env: { ...process.env, SAMPLE_API_TOKENS: API_TOKENS, ...env, PORT: String(port), HOST: '127.0.0.1', TS_NODE_PROJECT: path.join(ROOT, 'tsconfig.json'), NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const collect = (chunk) => {
    const text = chunk.toString();
    logs.push(text);
    if (verbose) process.stderr.write(indent(text.trimEnd(), '  [app] ') + '\n');
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  return { child, port, base: `http://127.0.0.1:${port}`, logs };
}

/** Resolves once the app answers HTTP; fails if it exits or takes too long. */
async function waitForApp(app) {
  const { child } = app;
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new DemoFailure(`the sample app exited during startup (code ${child.exitCode ?? child.signalCode})`);
    }
    try {
      const res = await fetch(`${app.base}/payments/ledger/count`, { headers: auth(), signal: AbortSignal.timeout(2000) });
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new DemoFailure(`the sample app did not answer on ${app.base} within ${STARTUP_TIMEOUT_MS / 1000}s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** POST /payments with a key, as `client`; returns status, headers and parsed body. */
async function charge(app, key, body, client = CLIENT_A) {
  const res = await fetch(`${app.base}/payments`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key, ...auth(client) },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

async function ledgerCount(app) {
  const res = await fetch(`${app.base}/payments/ledger/count`, { headers: auth() });
  check(res.ok, `GET /payments/ledger/count answered ${res.status}`);
  return (await res.json()).count;
}

function showRequest(key, body, client = CLIENT_A) {
  out(`    POST /payments   Idempotency-Key: ${key}   (as ${client.id})`);
  out(`    ${JSON.stringify(body)}`);
}

function showResponse(r, headerNames) {
  out(`    → ${r.status}`);
  for (const name of headerNames) {
    const value = r.headers.get(name);
    if (value !== null) out(`      ${name}: ${value}`);
  }
  out(indent(r.json !== undefined ? JSON.stringify(r.json, null, 2) : r.text));
}

async function runScript(app) {
  const baseline = await ledgerCount(app);
  out(`Sample app on ${app.base} — ledger holds ${baseline} charge(s) before the demo.`);

  // 1. First charge with a fresh key.
  out();
  out('1) First charge with a fresh key — the handler runs and records a charge');
  const key = newKey('pay');
  const body = { amount: 4200, currency: 'EUR' };
  showRequest(key, body);
  const first = await charge(app, key, body);
  showResponse(first, ['Location', 'Idempotent-Replayed']);
  check(first.status === 201, `expected 201 for the first charge, got ${first.status}: ${first.text}`);
  check(first.headers.get('Idempotent-Replayed') === null, 'the first response must not carry Idempotent-Replayed');
  const location = first.headers.get('Location');
  check(location === `/payments/${first.json.id}`, `expected Location /payments/${first.json.id}, got ${location}`);
  const fetched = await fetch(app.base + location, { headers: auth() });
  out(`    GET ${location} → ${fetched.status}`);
  check(fetched.status === 200, `GET ${location} answered ${fetched.status}`);
  check((await ledgerCount(app)) === baseline + 1, 'the first charge should add exactly one ledger row');

  // 2. The same request again.
  out();
  out('2) The same request retried (say the client timed out) — replayed, not charged again');
  showRequest(key, body);
  const retry = await charge(app, key, body);
  showResponse(retry, ['Location', 'Idempotent-Replayed']);
  check(retry.status === 201, `expected the replay to keep status 201, got ${retry.status}`);
  check(retry.headers.get('Idempotent-Replayed') === 'true', 'expected Idempotent-Replayed: true on the retry');
  check(retry.text === first.text, 'the replayed body differs from the original');
  check(retry.headers.get('Location') === location, 'the replayed Location differs from the original');
  const afterRetry = await ledgerCount(app);
  out(`    same body byte for byte: yes; ledger still holds ${afterRetry - baseline} new charge(s)`);
  check(afterRetry === baseline + 1, `the retry charged again (ledger grew to ${afterRetry})`);

  // 3. A storm of concurrent duplicates.
  out();
  out(`3) ${CONCURRENT} concurrent duplicates with a new key — exactly one runs`);
  const stormKey = newKey('storm');
  const stormBody = { amount: 999, currency: 'USD' };
  showRequest(stormKey, stormBody);
  const results = await Promise.all(Array.from({ length: CONCURRENT }, () => charge(app, stormKey, stormBody)));
  const ran = results.filter((r) => r.status === 201 && r.headers.get('Idempotent-Replayed') === null);
  const replayed = results.filter((r) => r.status === 201 && r.headers.get('Idempotent-Replayed') === 'true');
  const conflicts = results.filter((r) => r.status === 409);
  const other = results.filter((r) => r.status !== 201 && r.status !== 409);
  out(`    → 201 (ran the handler): ${ran.length}`);
  out(`    → 201 (replayed):        ${replayed.length}`);
  out(`    → 409 (in progress):     ${conflicts.length}` +
    (conflicts.length ? `   e.g. Retry-After: ${conflicts[0].headers.get('Retry-After')}, ${conflicts[0].headers.get('Content-Type')}` : ''));
  if (other.length) out(`    → other: ${other.map((r) => `${r.status} ${r.text}`).join('; ')}`);
  const afterStorm = await ledgerCount(app);
  const ids = new Set([...ran, ...replayed].map((r) => r.json.id));
  out(`    charges recorded for this key: ${afterStorm - afterRetry} (payment ids seen: ${[...ids].join(', ')})`);
  check(other.length === 0, `unexpected statuses in the storm: ${other.map((r) => r.status).join(', ')}`);
  check(ran.length === 1, `expected exactly one request to run the handler, got ${ran.length}`);
  check(ids.size === 1, `the successful responses name ${ids.size} different payments`);
  check(conflicts.every((r) => r.headers.get('Retry-After') !== null), 'a 409 came without Retry-After');
  check(afterStorm === afterRetry + 1, `expected one new ledger row, got ${afterStorm - afterRetry}`);

  // 4. The first key reused for a different request.
  out();
  out('4) The first key reused with another amount — refused, nothing charged');
  const changed = { amount: 5000, currency: 'EUR' };
  showRequest(key, changed);
  const mismatch = await charge(app, key, changed);
  showResponse(mismatch, ['Content-Type']);
  check(mismatch.status === 422, `expected 422, got ${mismatch.status}: ${mismatch.text}`);
  check((mismatch.headers.get('Content-Type') || '').startsWith('application/problem+json'), 'expected an application/problem+json body');
  check(mismatch.json && mismatch.json.status === 422 && typeof mismatch.json.type === 'string', 'the 422 body is not problem details');

  // 5. Another client sends the first client's key.
  out();
  out(`5) Another client (${CLIENT_B.id}, its own token) sends ${CLIENT_A.id}'s key — keys are scoped to the authenticated client`);
  showRequest(key, body, CLIENT_B);
  const foreign = await charge(app, key, body, CLIENT_B);
  showResponse(foreign, ['Location', 'Idempotent-Replayed']);
  check(foreign.status === 201, `expected 201 for the other client's own charge, got ${foreign.status}: ${foreign.text}`);
  check(foreign.headers.get('Idempotent-Replayed') === null, `${CLIENT_B.id} was replayed ${CLIENT_A.id}'s response`);
  check(foreign.json.id !== first.json.id, `${CLIENT_B.id} received ${CLIENT_A.id}'s payment`);
  const anonymous = await fetch(`${app.base}/payments`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key },
    body: JSON.stringify(body),
  });
  out(`    the same request without a bearer token → ${anonymous.status}`);
  check(anonymous.status === 401, `expected 401 without a token, got ${anonymous.status}`);

  // 6. The ledger.
  out();
  const final = await ledgerCount(app);
  out(`6) Ledger: ${final} charge(s) in total, ${final - baseline} added by this demo ` +
    `from ${4 + CONCURRENT} payment requests (expected 3: one per client and key).`);
  check(final === baseline + 3, `expected the demo to add 3 ledger rows, it added ${final - baseline}`);
}

/** Operating it: where the metrics, health check, API docs and console are, and a few metric values after the run. */
async function runOperationsScript(app) {
  out();
  out('11) Operating it: metrics, health, OpenAPI and the console of the running app');
  // The app restarted in the parts above (its counters with it): one charge and its retry give the metrics something to show.
  const key = `demo-metrics-${randomUUID()}`;
  const first = await charge(app, key, { amount: 100, currency: 'EUR' });
  const retry = await charge(app, key, { amount: 100, currency: 'EUR' });
  check(first.status === 201 && retry.headers.get('Idempotent-Replayed') === 'true', `a charge and its retry: ${first.status}, then ${retry.status}`);
  const metricsText = await (await fetch(`${app.base}/metrics`)).text();
  const sample = (labels) => {
    const line = metricsText.split('\n').find((l) => l.startsWith('idempotency_claims_total{') && labels.every((x) => l.includes(x)));
    return line ? Number(line.split(' ').pop()) : 0;
  };
  out(`    GET ${app.base}/metrics → Prometheus text; since the app's last restart (one charge and its retry just now), HTTP claims: acquired ${sample(['face="http"', 'outcome="acquired"'])}, ` +
    `replay ${sample(['face="http"', 'outcome="replay"'])}, in_progress ${sample(['face="http"', 'outcome="in_progress"'])}, ` +
    `mismatch ${sample(['face="http"', 'outcome="mismatch"'])}; inbox duplicates ${sample(['face="inbox"', 'outcome="replay"'])}`);
  check(sample(['face="http"', 'outcome="replay"']) > 0, 'the metrics show no HTTP replay after the demo replayed requests');
  const health = await fetch(`${app.base}/health`);
  const healthBody = await health.json();
  out(`    GET ${app.base}/health → ${health.status} ${JSON.stringify(healthBody.details?.idempotency ?? healthBody)}`);
  check(health.status === 200, `/health answered ${health.status}`);
  const doc = await (await fetch(`${app.base}/docs-json`)).json();
  const documented = Object.entries(doc.paths ?? {}).filter(([, ops]) => Object.values(ops).some((op) => (op.parameters ?? []).some((p) => p.name === 'Idempotency-Key')));
  out(`    Swagger UI at ${app.base}/docs; operations documenting Idempotency-Key: ${documented.map(([p]) => p).join(', ') || 'none'}`);
  const refused = await fetch(`${app.base}/_idempotency`);
  const consolePage = await fetch(`${app.base}/_idempotency`, { headers: auth() });
  out(`    console at ${app.base}/_idempotency (bearer token of an API client): without a token → ${refused.status}, with → ${consolePage.status}`);
  check(refused.status === 403 && consolePage.status === 200, 'the console is not guarded as expected');
}

/** 12. A payment's receipt is a @Task with task id receipt-<payment id>: asking for it again returns the same task and result. */
async function runReceiptScript(app) {
  out();
  out('12) Each charge enqueues its receipt as a @Task with task id receipt-<payment id>; asking again returns the same task and result');
  const first = await charge(app, newKey('receipt'), { amount: 2500, currency: 'EUR' });
  check(first.status === 201, `the charge answered ${first.status}`);
  const paymentId = first.json.id;
  out(`    POST /payments → 201, payment ${paymentId}; the charge enqueued task receipt-${paymentId}`);
  const asks = [];
  for (let i = 0; i < 2; i++) {
    const res = await fetch(`${app.base}/payments/${paymentId}/receipt`, { method: 'POST', headers: auth() });
    const body = await res.json();
    check(res.status === 201, `POST /payments/${paymentId}/receipt answered ${res.status}: ${JSON.stringify(body)}`);
    out(`    POST /payments/${paymentId}/receipt → task ${body.taskId}, execution ${body.executionId}, ${body.status}, receipt ${body.receipt.receiptNumber}, receipts sent: ${body.sends}`);
    asks.push(body);
  }
  check(asks[0].executionId === asks[1].executionId, 'the duplicate enqueue must return the same execution');
  check(JSON.stringify(asks[0].receipt) === JSON.stringify(asks[1].receipt), 'the duplicate enqueue must return the same stored result');
  check(asks[1].sends === 1, `one receipt must have been sent, not ${asks[1].sends}`);
  out('    the same execution and its stored result both times: one receipt sent');
}

/** 7. A webhook delivered several times (twice at once) is handled once, through the inbox. */
async function runWebhookScript(app) {
  out();
  out('7) The payment provider delivers one webhook event 4 times (2 at once) — the inbox handles it once');
  const event = { id: `evt_${randomUUID()}`, type: 'payment.succeeded', data: { paymentId: 'demo' } };
  const deliver = async () => {
    const res = await fetch(`${app.base}/webhooks/payment-provider`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(event),
    });
    const text = await res.text();
    check(res.status === 200, `the webhook answered ${res.status}: ${text}`);
    return JSON.parse(text).status;
  };
  out(`    POST /webhooks/payment-provider   ${JSON.stringify(event)}`);
  const statuses = [...(await Promise.all([deliver(), deliver()])), await deliver(), await deliver()];
  statuses.forEach((status, i) => out(`    delivery ${i + 1} → ${status}`));
  const res = await fetch(`${app.base}/webhooks/payment-provider/events/${event.id}/count`);
  const { count } = await res.json();
  out(`    events recorded for ${event.id}: ${count}`);
  check(statuses.filter((s) => s === 'processed').length === 1, `expected one delivery processed, got ${statuses.join(', ')}`);
  check(count === 1, `expected the event to be recorded once, got ${count}`);
}

/** Demo settings for the order workflow: slow steps (so one can be interrupted) and quick crash recovery. */
const WORKFLOW_DEMO_ENV = {
  ORDER_STEP_DELAY_MS: '1500',
  WORKFLOWS_LOCK_DURATION: '3s',
  WORKFLOWS_STALLED_INTERVAL: '1s',
  WORKFLOWS_RECOVERY_INTERVAL: '2s',
  WORKFLOWS_POLL_INTERVAL: '500ms',
  // part 9: the demo hooks of the payment route, and a short lease so the retry after the SIGKILL need not wait 30 s
  SAMPLE_DEMO_HOOKS: '1',
  IDEMPOTENCY_LOCK_TIMEOUT: '3s',
  // part 10: a payment.created job whose worker was killed is taken over after 3 s
  NOTIFICATIONS_LOCK_DURATION_MS: '3000',
};

async function orderState(app, orderId) {
  const res = await fetch(`${app.base}/orders/${orderId}`, { headers: auth() });
  check(res.ok, `GET /orders/${orderId} answered ${res.status}`);
  return res.json();
}

async function pollOrder(app, orderId, until, what, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await orderState(app, orderId);
    if (until(state)) return state;
    check(Date.now() < deadline, `timed out waiting for ${what}; last state: ${JSON.stringify(state.execution.status)} ${JSON.stringify(state.stepRuns)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * 8. An order workflow charges, then waits for the payment provider's confirmation (a webhook, through the inbox);
 * its worker is killed with SIGKILL while it waits. After a restart the confirmation arrives (delivered twice), the
 * order ships in a child workflow and completes; every step body ran once.
 */
async function runWorkflowScript(app, env) {
  out();
  out('8) An order runs as a durable workflow: charge → wait for payment.confirmed → ship (child workflow); its worker is killed while it waits');
  const orderId = `demo-${randomUUID().slice(0, 8)}`;
  const res = await fetch(`${app.base}/orders`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Idempotency-Key': newKey('order'), ...auth() },
    body: JSON.stringify({ orderId, amount: 4200, sku: 'BOOK-1', quantity: 1 }),
  });
  const started = await res.json();
  out(`    POST /orders → ${res.status}, workflow ${started.workflowId}, execution ${started.executionId}`);
  check(res.status === 202, `expected 202 for the order, got ${res.status}: ${JSON.stringify(started)}`);
  const waiting = await pollOrder(app, orderId, (s) => s.events.status === 'awaiting-payment-confirmation' && s.execution.suspendedUntil !== null, 'the order to wait for its payment confirmation');
  out(`    status event: "${waiting.events.status}"; the execution is suspended (no worker slot held) → SIGKILL the app and its worker (pid ${app.child.pid})`);
  await stop(app.child, 'SIGKILL');
  const restarted = await startApp(env);
  await waitForApp(restarted);
  out(`    restarted the app (pid ${restarted.child.pid}); the provider now confirms the payment (the webhook is delivered twice)`);
  const event = { id: `evt_${randomUUID().slice(0, 12)}`, type: 'payment.confirmed', data: { paymentId: `pay_${orderId}`, orderId } };
  for (let i = 0; i < 2; i++) {
    const hook = await fetch(`${restarted.base}/webhooks/payment-provider`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(event) });
    out(`    POST /webhooks/payment-provider ${event.id} → ${hook.status} ${JSON.stringify(await hook.json())}`);
    check(hook.status === 200, `the webhook answered ${hook.status}`);
  }
  const done = await pollOrder(restarted, orderId, (s) => s.execution.status === 'completed', 'the order to complete');
  out(`    status: ${done.execution.status}; status event: "${done.events.status}"; result: ${JSON.stringify(done.execution.result)}`);
  for (const step of done.steps) out(`    #${String(step.position).padEnd(2)} ${step.name.padEnd(14)} ${step.name === 'charge' ? `body ran ${done.stepRuns.charge}×` : JSON.stringify(step.result)}`);
  for (const child of done.children) out(`    child workflow ${child.workflowName} (${child.workflowId}): ${child.status}`);
  check(done.events.status === 'completed', `expected the status event "completed", got ${JSON.stringify(done.events.status)}`);
  check(done.stepRuns.charge === 1, `charge completed before the crash and must not run again (ran ${done.stepRuns.charge}×)`);
  check(done.stepRuns['reserve-stock'] === 1 && done.stepRuns['send-confirmation'] === 1, `shipping steps ran ${JSON.stringify(done.stepRuns)}`);
  check(done.children.length === 1 && done.children[0].status === 'completed', `expected one completed shipping child, got ${JSON.stringify(done.children)}`);
  check(done.execution.result.paymentEventId === event.id, 'the order must have received the confirmation once');
  out('    the confirmation was received once (the second delivery was a duplicate), and the order shipped once');
  out('    (the charge step ran on the `stripe` queue: its rate limit, queues.stripe.rateLimit, holds across all instances)');
  const scheduled = await fetch(`${restarted.base}/reconciliations/schedule`, { headers: auth() });
  const schedule = await scheduled.json();
  check(scheduled.status === 200 && typeof schedule.nextOccurrenceId === 'string', `GET /reconciliations/schedule → ${scheduled.status} ${JSON.stringify(schedule)}`);
  out(`    GET /reconciliations/schedule → the daily reconciliation (@Scheduled '${schedule.cron}', catchUp '${schedule.catchUp}') runs next as ${schedule.nextOccurrenceId}, once however many instances run`);
  return restarted;
}

/** 9. A charge killed with SIGKILL after its ledger write, before its commit: nothing survives; the retry charges once. */
async function runTransactionalCrashScript(app, env) {
  out();
  out('9) Exactly-once charge (transaction: true): the app is killed with SIGKILL after the ledger write, before the commit');
  const key = newKey('crash');
  const body = { amount: 990, currency: 'EUR' };
  const before = await ledgerCount(app);
  showRequest(key, body);
  // X-Demo-Pause makes the sample app hold the charge after its ledger write (not part of the request fingerprint).
  const pending = fetch(`${app.base}/payments`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key, 'X-Demo-Pause': '1', ...auth() },
    body: JSON.stringify(body),
  }).catch(() => undefined); // its connection dies with the app
  for (const until = Date.now() + 30000; !app.logs.join('').includes('transaction still open (demo pause)'); ) {
    check(Date.now() < until, 'the sample app never reported the paused charge');
    await new Promise((r) => setTimeout(r, 50));
  }
  out(`    the ledger row is written inside the open transaction → SIGKILL the app (pid ${app.child.pid})`);
  await stop(app.child, 'SIGKILL');
  await pending;
  const restarted = await startApp(env);
  await waitForApp(restarted);
  const afterCrash = await ledgerCount(restarted);
  out(`    restarted the app (pid ${restarted.child.pid}); ledger: ${afterCrash} charge(s), ${before} before the crash — the killed charge left nothing`);
  check(afterCrash === before, `the killed charge must leave no ledger row (ledger went from ${before} to ${afterCrash})`);
  out('    the client retries with the same key (the claim died with the killed transaction: no lease to wait for):');
  let retried;
  for (const until = Date.now() + 60000; ; ) {
    retried = await charge(restarted, key, body);
    if (retried.status !== 409) break;
    check(Date.now() < until, 'the retry kept getting 409 after the lease should have lapsed');
    await new Promise((r) => setTimeout(r, 500));
  }
  showResponse(retried, ['Location', 'Idempotent-Replayed']);
  check(retried.status === 201, `the retry must charge (201), got ${retried.status}`);
  const replay = await charge(restarted, key, body);
  check(replay.status === 201 && replay.headers.get('Idempotent-Replayed') === 'true', `a second retry must replay, got ${replay.status}`);
  const after = await ledgerCount(restarted);
  out(`    ledger: ${after} charge(s) — exactly one charge for the key, though the handler wrote twice`);
  check(after === before + 1, `expected exactly one new ledger row, ledger went from ${before} to ${after}`);
  return restarted;
}

/**
 * 10. Every charge publishes payment.created in its transaction; the relay is killed with SIGKILL mid-delivery (its
 * messages claimed and locked, their BullMQ jobs being added); after a restart each payment is notified exactly once.
 */
async function runOutboxCrashScript(app, env) {
  out();
  out('10) Each charge publishes payment.created in its own transaction; the outbox relay is killed with SIGKILL mid-delivery');
  const { Pool } = require('pg');
  const Redis = require('ioredis');
  const db = new Pool({ connectionString: env.DATABASE_URL, max: 2 });
  const table = `"${(env.IDEMPOTENCY_SCHEMA || 'public').replace(/"/g, '""')}".outbox_messages`;
  // The payments' messages, and how many pending ones a relay holds locked (FOR UPDATE SKIP LOCKED skips those).
  const messages = async (paymentIds) => {
    const client = await db.connect();
    try {
      await client.query('BEGIN');
      const all = await client.query(`SELECT id, status, attempts FROM ${table} WHERE topic = 'payment.created' AND payload->>'id' = ANY($1)`, [paymentIds]);
      const free = await client.query(
        `SELECT id FROM ${table} WHERE topic = 'payment.created' AND payload->>'id' = ANY($1) AND status = 'pending' FOR UPDATE SKIP LOCKED`,
        [paymentIds],
      );
      await client.query('ROLLBACK');
      const pending = all.rows.filter((r) => r.status === 'pending').length;
      return { rows: all.rows, pending, locked: pending - free.rows.length };
    } finally {
      client.release();
    }
  };
  const notified = async (target, paymentId) => {
    const res = await fetch(`${target.base}/notifications/payments/${paymentId}`, { headers: auth() });
    check(res.ok, `GET /notifications/payments/${paymentId} answered ${res.status}`);
    return res.json();
  };

  try {
    const payments = [];
    let interrupted = 0;
    const redis = new Redis(env.REDIS_URL, { maxRetriesPerRequest: 1 });
    try {
      // Redis stops executing writes for a moment (at most 15 s), so the relay's addBulk hangs with its messages claimed.
      await redis.call('CLIENT', 'PAUSE', '15000', 'WRITE');
      out('    Redis paused for writes (CLIENT PAUSE … WRITE), so the relay will hang mid-delivery, adding the jobs');
      for (const amount of [1100, 2200, 3300]) {
        const body = { amount, currency: 'EUR' };
        const r = await charge(app, newKey('outbox'), body);
        check(r.status === 201, `expected 201 for the charge, got ${r.status}: ${r.text}`);
        payments.push(r.json.id);
      }
      out(`    3 charges → 201: payments ${payments.join(', ')}`);
      let state;
      for (const until = Date.now() + 30000; ; ) {
        state = await messages(payments);
        if (state.rows.length === 3 && state.pending === 3 && state.locked >= 1) break;
        check(Date.now() < until, `the relay never held the messages mid-delivery: ${JSON.stringify(state)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      await new Promise((r) => setTimeout(r, 300)); // let every idle relay loop take what it can
      state = await messages(payments);
      out(`    outbox: 3 payment.created messages, committed with their charges; ${state.locked} claimed and locked by the relay ` +
        'mid-delivery (the rest wait for a free relay loop), none marked delivered');
      out(`    → SIGKILL the app and its relay (pid ${app.child.pid})`);
      await stop(app.child, 'SIGKILL');
      interrupted = state.locked;
    } finally {
      await redis.call('CLIENT', 'UNPAUSE').catch(() => undefined);
      redis.disconnect();
    }
    const orphaned = await messages(payments);
    out(`    after the kill: ${orphaned.pending} of 3 still pending, ${orphaned.locked} locked (the locks died with the relay's connections)`);
    check(orphaned.pending === 3 && orphaned.locked === 0, `expected 3 pending, unlocked messages after the kill: ${JSON.stringify(orphaned)}`);

    const restarted = await startApp(env);
    await waitForApp(restarted);
    out(`    restarted the app (pid ${restarted.child.pid}); its relay delivers the 3 messages, the ${interrupted} interrupted ones again (job id = message id)`);
    for (const until = Date.now() + 60000; ; ) {
      const state = await messages(payments);
      const counts = await Promise.all(payments.map((id) => notified(restarted, id)));
      if (state.pending === 0 && counts.every((c) => c.notifications >= 1)) break;
      check(Date.now() < until, `the payments were not all notified: ${JSON.stringify({ state, counts })}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    // Anything late (a job added twice, a redelivered message) would show up within a moment: look again.
    await new Promise((r) => setTimeout(r, 1000));
    const final = await messages(payments);
    for (const id of payments) {
      const { notifications, runs } = await notified(restarted, id);
      out(`    payment ${id}: ${notifications} notification (the consumer ran ${runs}×)`);
      check(notifications === 1, `payment ${id} was notified ${notifications} times`);
    }
    check(final.rows.every((r) => r.status === 'delivered'), `expected every message delivered: ${JSON.stringify(final.rows)}`);
    out('    exactly one notification per payment: the relay delivers at least once, the job id and the inbox make it once');
    return restarted;
  } finally {
    await db.end();
  }
}

async function main() {
  let services;
  let app;
  let interrupted = false;
  const cleanup = async () => {
    if (app) await stop(app.child);
    if (services) await services.stop();
  };
  process.once('SIGINT', () => {
    interrupted = true;
    process.stderr.write('\ninterrupted; stopping the app and the services the demo started\n');
    void cleanup().finally(() => process.exit(130));
  });

  try {
    services = await ensureServices('demo');
    if (interrupted) return;
    const env = { ...services.env, ...WORKFLOW_DEMO_ENV };
    app = await startApp(env);
    await waitForApp(app);
    await runScript(app);
    await runWebhookScript(app);
    app = await runWorkflowScript(app, env);
    app = await runTransactionalCrashScript(app, env);
    app = await runOutboxCrashScript(app, env);
    await runOperationsScript(app);
    await runReceiptScript(app);
    out();
    out('Demo finished: every step behaved as expected.');
  } catch (err) {
    if (interrupted) return;
    process.exitCode = 1;
    process.stderr.write(`\nDEMO FAILED: ${err instanceof DemoFailure ? err.message : err.stack || err}\n`);
    if (app && app.logs.length) {
      const tail = app.logs.join('').trimEnd().split('\n').slice(-40).join('\n');
      process.stderr.write(`\nLast lines of the sample app's log:\n${indent(tail, '  ')}\n`);
    }
  } finally {
    if (!interrupted) await cleanup().catch((err) => {
      process.exitCode = 1;
      process.stderr.write(`could not stop everything cleanly: ${err.message}\n`);
    });
  }
}

void main();
