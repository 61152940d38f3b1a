// The request-driven scenarios (HTTP keys, guarded method calls, inbox deliveries): every key sent once, a share
// of them again as duplicates — at once to another instance, or later to any — under a supervisor's faults; then,
// after the leases passed, every key once more to check it ends answered.
import { ChaosClient, pool, RetryPolicy, Seen } from './client';
import type { Instance } from './instances';
import type { Supervisor } from './supervisor';

/** One key of a scenario: where it is sent, with which headers. */
export interface KeyedRequest {
  key: string;
  path: string;
  headers?: Record<string, string>;
}

interface Send {
  request: KeyedRequest;
  order: number;
  atOnce: boolean;
}

export interface KeyedRun {
  client: ChaosClient;
  /** The final pass after the faults stopped and the leases passed. */
  verify: ChaosClient;
  duplicatesSent: number;
  /** Keys the final pass could not get answered. */
  unanswered: string[];
  durationMs: number;
}

/** Builds the send order: every key once; `duplicateRate` of them again, half at once, half later. */
function plan(requests: KeyedRequest[], duplicateRate: number): { sends: Send[]; duplicates: number } {
  const sends: Send[] = requests.map((request, i) => ({ request, order: i, atOnce: false }));
  let duplicates = 0;
  requests.forEach((request, i) => {
    if (Math.random() >= duplicateRate) return;
    duplicates++;
    if (Math.random() < 0.5) sends[i].atOnce = true;
    else sends.push({ request, order: i + 1 + Math.random() * requests.length * 0.3, atOnce: false });
  });
  return { sends: sends.sort((a, b) => a.order - b.order), duplicates };
}

export async function runKeyed(
  instances: Instance[],
  requests: KeyedRequest[],
  options: { duplicateRate: number; concurrency: number; retry: RetryPolicy; leaseMs: number },
  supervise: (progress: () => number) => Supervisor,
): Promise<KeyedRun> {
  const client = new ChaosClient(instances, options.retry);
  const { sends, duplicates } = plan(requests, options.duplicateRate);
  // Faults fire by how far the sending got, with the whole concurrency in flight.
  let dispatched = 0;
  const supervisor = supervise(() => dispatched / sends.length);
  const t0 = Date.now();
  supervisor.start();
  try {
    await pool(sends, options.concurrency, async (send, i) => {
      await supervisor.reached(i / sends.length);
      dispatched = Math.max(dispatched, i + 1);
      const { key, path, headers } = send.request;
      if (send.atOnce) {
        // the duplicate goes to the next instance at the same moment
        await Promise.all([client.send(path, key, headers, i), client.send(path, key, headers, i + 1)]);
      } else {
        await client.send(path, key, headers);
      }
    });
  } finally {
    await supervisor.stop();
  }
  const durationMs = Date.now() - t0;
  await new Promise((resolve) => setTimeout(resolve, options.leaseMs + 1_000));
  const verify = new ChaosClient(instances, { ...options.retry, attempts: options.retry.attempts * 2 });
  const unanswered: string[] = [];
  await pool(requests, options.concurrency, async ({ key, path, headers }) => {
    if (!(await verify.send(path, key, headers))) unanswered.push(key);
  });
  return { client, verify, duplicatesSent: duplicates, unanswered, durationMs };
}

/** Every 2xx a key got, during the run and in the final pass. */
export function allSeen(run: KeyedRun, key: string): Seen[] {
  return [...(run.client.seen.get(key) ?? []), ...(run.verify.seen.get(key) ?? [])];
}
