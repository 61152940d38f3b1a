import type { StoredError } from '../errors/workflow-failed.error';
import type { WorkflowExecution, WorkflowStatus } from '../workflow/workflow.interfaces';
import type { ConsoleExecution, ConsoleWorkflowFilter } from './idempotency-console.service';
import type { KeyRecord } from './key-records';

const STATUSES: WorkflowStatus[] = ['pending', 'running', 'completed', 'failed', 'cancelled', 'timed_out'];

const STYLE = `
*{box-sizing:border-box}body{margin:0;font:14px/1.4 system-ui,sans-serif;color:#1d2330;background:#f6f7f9;overflow-wrap:anywhere}
header{background:#1d2330;color:#fff;padding:8px 16px;display:flex;gap:16px;flex-wrap:wrap;align-items:center}
header a{color:#cfe0ff;text-decoration:none}main{padding:16px;max-width:100%}
table{width:100%;border-collapse:collapse;table-layout:fixed;background:#fff}th,td{padding:6px 8px;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:top}
form.filters,form.lookup{display:flex;flex-wrap:wrap;gap:8px;margin:0 0 12px}input,select,button{font:inherit;padding:4px 8px;max-width:100%}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#fff;border:1px solid #e3e6eb;padding:8px;margin:4px 0}
.status{font-weight:600}.s-completed{color:#17803d}.s-failed,.s-timed_out{color:#b42318}.s-running,.s-pending{color:#175cd3}.s-cancelled{color:#667085}.s-delivered,.s-fired{color:#17803d}.s-waiting{color:#175cd3}
.actions{display:flex;gap:8px;margin:12px 0}.note{padding:8px;background:#fff7d6;border:1px solid #f0d48a}dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 12px}
@media (max-width:640px){.wide{display:none}}`;

/** HTML-escapes text for element content and attribute values. */
export function escapeHtml(value: string | number | undefined | null): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}

const time = (d: Date | null | undefined) => (d ? d.toISOString().replace('T', ' ').slice(0, 23) : '');
const status = (s: string) => `<span class="status s-${escapeHtml(s)}">${escapeHtml(s)}</span>`;
const json = (v: unknown) => `<pre>${escapeHtml(JSON.stringify(v, null, 2))}</pre>`;

function error(e: StoredError | null): string {
  if (!e) return '';
  return `<details class="error"><summary>${escapeHtml(e.name)}: ${escapeHtml(e.message)}</summary>${e.stack ? `<pre>${escapeHtml(e.stack)}</pre>` : ''}</details>`;
}

function layout(base: string, title: string, body: string, note?: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(title)} · idempotency console</title><style>${STYLE}</style></head><body>
<header><strong>idempotency</strong><a href="${base}">Workflows</a><a href="${base}/keys">Keys</a></header>
<main><h1>${escapeHtml(title)}</h1>${note ? `<p class="note" role="status">${escapeHtml(note)}</p>` : ''}${body}</main></body></html>`;
}

/** The workflows list with its filter form. */
export function workflowsPage(base: string, executions: WorkflowExecution[], filter: ConsoleWorkflowFilter, note?: string): string {
  const options = ['', ...STATUSES].map((s) => `<option value="${s}"${filter.status === s ? ' selected' : ''}>${s || 'any status'}</option>`).join('');
  const local = (d?: Date) => (d ? d.toISOString().slice(0, 16) : '');
  const rows = executions.map((e) => `<tr>
<td><a href="${base}/workflows/${encodeURIComponent(e.executionId)}">${escapeHtml(e.workflowId)}</a></td><td>${escapeHtml(e.workflowName)}</td>
<td>${status(e.status)}</td><td class="wide">${time(e.createdAt)}</td><td class="wide">${time(e.updatedAt)}</td></tr>`).join('');
  return layout(base, 'Workflows', `<form class="filters" method="get" action="${base}">
<select name="status" aria-label="status">${options}</select>
<input name="workflow" placeholder="workflow name" aria-label="workflow" value="${escapeHtml(filter.workflow)}">
<label>since <input type="datetime-local" name="since" value="${local(filter.since)}"></label>
<label>until <input type="datetime-local" name="until" value="${local(filter.until)}"></label>
<button type="submit">Filter</button></form>
<table id="workflows"><thead><tr><th>workflow id</th><th>name</th><th>status</th><th class="wide">created (UTC)</th><th class="wide">updated (UTC)</th></tr></thead>
<tbody>${rows || '<tr><td colspan="5">no executions</td></tr>'}</tbody></table>`, note);
}

/** One execution: its details, cancel / resume, and its steps' timeline. */
export function executionPage(base: string, { execution: e, steps, events, messages, waits }: ConsoleExecution, note?: string): string {
  const action = (verb: 'cancel' | 'resume') =>
    `<form method="post" enctype="text/plain" action="${base}/workflows/${encodeURIComponent(e.workflowId)}/${verb}?execution=${encodeURIComponent(e.executionId)}"><button type="submit" id="${verb}">${verb === 'cancel' ? 'Cancel' : 'Resume'}</button></form>`;
  const actions = [e.status === 'pending' || e.status === 'running' ? action('cancel') : '', e.status === 'failed' || e.status === 'cancelled' ? action('resume') : ''].join('');
  let previous = e.createdAt.getTime();
  const rows = [...steps].sort((a, b) => a.sequence - b.sequence).map((s) => {
    const took = Math.max(s.completedAt.getTime() - previous, 0);
    previous = s.completedAt.getTime();
    return `<tr><td>${s.position}</td><td>${escapeHtml(s.name)}</td><td>${status(s.status)}</td><td>${s.attempts}</td>
<td class="wide">${time(s.completedAt)} (+${took} ms)</td><td>${s.status === 'failed' ? error(s.error) : json(s.result)}</td></tr>`;
  }).join('');
  return layout(base, `Workflow ${e.workflowId}`, `<dl>
<dt>execution</dt><dd>${escapeHtml(e.executionId)}</dd><dt>workflow</dt><dd>${escapeHtml(e.workflowName)}</dd>
<dt>status</dt><dd id="status">${status(e.status)}</dd><dt>created</dt><dd>${time(e.createdAt)}</dd><dt>updated</dt><dd>${time(e.updatedAt)}</dd>
<dt>recoveries</dt><dd>${e.recoveryAttempts}</dd><dt>input</dt><dd>${json(e.input)}</dd>
${e.status === 'completed' ? `<dt>result</dt><dd>${json(e.result)}</dd>` : ''}${e.error ? `<dt>error</dt><dd>${error(e.error)}</dd>` : ''}</dl>
<div class="actions">${actions}</div>
<h2>Steps</h2><table id="steps"><thead><tr><th>#</th><th>step</th><th>status</th><th>attempts</th><th class="wide">checkpointed (UTC)</th><th>result / error</th></tr></thead>
<tbody>${rows || '<tr><td colspan="6">no step checkpointed yet</td></tr>'}</tbody></table>${activity(events, messages, waits)}`, note);
}

/** The execution's events, messages and durable waits: a section for each it has. */
function activity(events: ConsoleExecution['events'], messages: ConsoleExecution['messages'], waits: ConsoleExecution['waits']): string {
  const table = (id: string, title: string, head: string[], rows: string[]) => (rows.length === 0 ? '' :
    `<h2>${title}</h2><table id="${id}"><thead><tr>${head.map((h) => `<th${h.startsWith('~') ? ' class="wide"' : ''}>${escapeHtml(h.replace(/^~/, ''))}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`);
  return table('events', 'Events', ['key', 'value', '~updated (UTC)'], events.map((v) =>
    `<tr><td>${escapeHtml(v.key)}</td><td>${json(v.value)}</td><td class="wide">${time(v.updatedAt)}</td></tr>`)) +
    table('messages', 'Messages', ['topic', 'status', 'sent (UTC)', '~received at step #', 'message'], messages.map((m) =>
      `<tr><td>${escapeHtml(m.topic)}</td><td>${status(m.status)}</td><td>${time(m.sentAt)}</td><td class="wide">${m.receivedAt ?? ''}</td><td>${json(m.message)}</td></tr>`)) +
    table('waits', 'Waits', ['#', 'kind', 'wakes (UTC)', 'status'], waits.map((w) =>
      `<tr><td>${w.position}</td><td>${escapeHtml(w.kind === 'recv' ? 'recv (message)' : 'sleep')}</td><td>${w.wakeAt ? time(w.wakeAt) : 'on a message only'}</td><td>${status(w.fired ? 'fired' : 'waiting')}</td></tr>`));
}

/** Key lookup: the records of a key in a scope, and a release button while one is in progress. */
export function keysPage(base: string, scope: string, key: string, records: KeyRecord[] | undefined, note?: string): string {
  const query = `scope=${encodeURIComponent(scope)}&key=${encodeURIComponent(key)}`;
  const release = records?.some((r) => r.status === 'in_progress')
    ? `<form method="post" enctype="text/plain" action="${base}/keys/release?${query}"><button type="submit" id="release">Release</button></form>` : '';
  const rows = (records ?? []).map((r) => `<tr><td>${status(r.status)}</td><td>${r.status === 'in_progress' ? (r.leaseHeld ? `held until ${time(r.lockedUntil)}` : 'lapsed') : ''}</td>
<td class="wide">${time(r.createdAt)}</td><td>${time(r.expiresAt)}</td><td>${r.error ? json(r.error) : ''}</td></tr>`).join('');
  const table = records === undefined ? '' : `<table id="records"><thead><tr><th>status</th><th>lease</th><th class="wide">created (UTC)</th><th>expires (UTC)</th><th>error</th></tr></thead>
<tbody>${rows || '<tr><td colspan="5">no record: the key is new</td></tr>'}</tbody></table><div class="actions">${release}</div>`;
  return layout(base, 'Keys', `<form class="lookup" method="get" action="${base}/keys">
<input name="scope" placeholder="scope, e.g. http:tenant-1" aria-label="scope" value="${escapeHtml(scope)}">
<input name="key" placeholder="key" aria-label="key" value="${escapeHtml(key)}"><button type="submit">Look up</button></form>${table}`, note);
}
