// One app instance of the chaos run, started (and SIGKILLed) as a real process by chaos/main.ts.
// A real Nest app using the library with Postgres and Redis. Every handler records its effect in a ledger table
// WITHOUT a unique constraint, so a second run of the same key shows up as a second row instead of being prevented.
// Environment: DATABASE_URL, REDIS_URL, CHAOS_PORT, CHAOS_SCHEMA (the library's), CHAOS_LEDGER (schema of the
// ledger tables), CHAOS_WORKERS (1 = run workflow workers), CHAOS_LEASE, CHAOS_HANDLER_MS, CHAOS_STEP_MS,
// CHAOS_BREAK (an invariant to break on purpose: "tx-outside" writes the transactional ledger outside the transaction).
// Prints "LISTENING <port>" once it serves.
import 'reflect-metadata';
import { Controller, Headers, HttpException, Injectable, Module, Param, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import {
  currentStep,
  currentTransaction,
  DuplicateExecutionError,
  Idempotent,
  IdempotencyModule,
  IdempotentMethod,
  InboxService,
  Step,
  StoreUnavailableError,
  Workflow,
  WorkflowClient,
} from '../lib';

const env = process.env;
const ledger = env.CHAOS_LEDGER as string;
const lease = env.CHAOS_LEASE ?? '2s';
const handlerMs = Number(env.CHAOS_HANDLER_MS ?? 20);
const stepMs = Number(env.CHAOS_STEP_MS ?? 30);
const breakTx = env.CHAOS_BREAK === 'tx-outside';

/** Writes outside any library transaction: the "plain" handlers' effects (autocommit, own pool). */
const plainPool = new Pool({ connectionString: env.DATABASE_URL, max: 10 });
plainPool.on('error', () => undefined); // a Postgres restart ends idle clients; the next query reconnects

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms * (0.5 + Math.random())));

/** Inserts one effect row; through the library's transaction when `inTransaction`, else autocommit. */
async function record(kind: string, key: string, runId: string, inTransaction: boolean): Promise<void> {
  const sql = `INSERT INTO "${ledger}".effects (kind, key, run_id, pid) VALUES ($1, $2, $3, $4)`;
  const args = [kind, key, runId, process.pid];
  if (inTransaction && !breakTx) await currentTransaction().query(sql, args);
  else await plainPool.query(sql, args);
}

/** What every handler answers: the run that produced it, so replays can be matched to runs. */
interface RunBody {
  key: string;
  runId: string;
  pid: number;
}

@Injectable()
class ChargeService {
  @IdempotentMethod({ key: (key: string) => key, transaction: true, lockTimeout: lease })
  async chargeTx(key: string): Promise<RunBody> {
    const runId = randomUUID();
    await record('guard-tx', key, runId, true);
    await pause(handlerMs);
    return { key, runId, pid: process.pid };
  }

  @IdempotentMethod({ key: (key: string) => key, lockTimeout: lease })
  async chargePlain(key: string): Promise<RunBody> {
    const runId = randomUUID();
    await record('guard-plain', key, runId, false);
    await pause(handlerMs);
    return { key, runId, pid: process.pid };
  }
}

/** The guard's own errors as the HTTP statuses a client retries on. */
async function asHttp<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof DuplicateExecutionError) throw new HttpException(err.message, 409);
    if (err instanceof StoreUnavailableError) throw new HttpException(err.message, 503);
    throw err;
  }
}

@Controller()
class ChaosController {
  constructor(
    private readonly charges: ChargeService,
    private readonly inbox: InboxService,
    private readonly workflows: WorkflowClient,
  ) {}

  @Post('http/tx')
  @Idempotent({ required: true, transaction: true })
  async httpTx(@Headers('idempotency-key') key: string): Promise<RunBody> {
    const runId = randomUUID();
    await record('http-tx', key, runId, true);
    await pause(handlerMs);
    return { key, runId, pid: process.pid };
  }

  @Post('http/plain')
  @Idempotent({ required: true })
  async httpPlain(@Headers('idempotency-key') key: string): Promise<RunBody> {
    const runId = randomUUID();
    await record('http-plain', key, runId, false);
    await pause(handlerMs);
    return { key, runId, pid: process.pid };
  }

  @Post('guard/tx/:key')
  guardTx(@Param('key') key: string): Promise<RunBody> {
    return asHttp(() => this.charges.chargeTx(key));
  }

  @Post('guard/plain/:key')
  guardPlain(@Param('key') key: string): Promise<RunBody> {
    return asHttp(() => this.charges.chargePlain(key));
  }

  @Post('inbox/:id')
  async deliver(@Param('id') id: string): Promise<{ status: string; pid: number }> {
    const outcome = await asHttp(() =>
      this.inbox.process(id, 'chaos', async () => {
        await record('inbox', id, randomUUID(), true);
        await pause(handlerMs);
      }),
    );
    return { status: outcome.status, pid: process.pid };
  }

  @Post('wf/:id')
  async start(@Param('id') id: string): Promise<{ executionId: string }> {
    const handle = await asHttp(() => this.workflows.start(ChaosWorkflow, { id }, { workflowId: id }));
    return { executionId: handle.executionId };
  }
}

/**
 * Five steps; the third commits its ledger row with its checkpoint, the others record their step key. The plain
 * steps retry (their own writes fail while Postgres restarts, as a real app's would); the transactional one keeps
 * the default single attempt: a lost connection of the library's transaction must not fail it.
 */
const RETRIED = { attempts: 5, backoff: { type: 'exponential' as const, delay: 200 } };

@Workflow({ name: 'chaos-five-steps' })
class ChaosWorkflow {
  async run(input: { id: string }): Promise<string[]> {
    const done: string[] = [];
    done.push(await this.reserve(input.id));
    done.push(await this.authorize(input.id));
    done.push(await this.debit(input.id));
    done.push(await this.notify(input.id));
    done.push(await this.close(input.id));
    return done;
  }

  @Step(RETRIED) reserve(id: string): Promise<string> {
    return stepEffect(id, false);
  }

  @Step(RETRIED) authorize(id: string): Promise<string> {
    return stepEffect(id, false);
  }

  @Step({ transaction: true }) debit(id: string): Promise<string> {
    return stepEffect(id, true);
  }

  @Step(RETRIED) notify(id: string): Promise<string> {
    return stepEffect(id, false);
  }

  @Step(RETRIED) close(id: string): Promise<string> {
    return stepEffect(id, false);
  }
}

/** One step run: a ledger row with the step's idempotency key and when the run started. */
async function stepEffect(id: string, inTransaction: boolean): Promise<string> {
  const step = currentStep();
  const startedAt = new Date();
  await pause(stepMs);
  const sql = `INSERT INTO "${ledger}".step_effects (execution_id, position, step_name, step_key, tx, started_at, pid)
               VALUES ($1, $2, $3, $4, $5, $6, $7)`;
  const args = [step.executionId, step.position, step.stepName, step.idempotencyKey, inTransaction, startedAt, process.pid];
  if (inTransaction && !breakTx) await currentTransaction().query(sql, args);
  else await plainPool.query(sql, args);
  return `${step.stepName}:${id}`;
}

@Module({
  imports: [
    IdempotencyModule.forRoot({
      postgres: { url: env.DATABASE_URL as string, schema: env.CHAOS_SCHEMA as string, poolSize: 20 },
      redis: { url: env.REDIS_URL as string },
      migrationsRun: true,
      http: { lockTimeout: lease, scope: 'global' },
      workflows: {
        app: 'chaos',
        workers: env.CHAOS_WORKERS === '1',
        concurrency: 10,
        lockDuration: 1500,
        stalledInterval: 500,
        recoveryInterval: 1000,
        pollInterval: 200,
        maxRecoveryAttempts: Number(env.CHAOS_MAX_RECOVERIES ?? 20),
      },
    }),
  ],
  controllers: [ChaosController],
  providers: [ChargeService, ChaosWorkflow],
})
class ChaosAppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create(ChaosAppModule, { logger: ['warn', 'error'] });
  app.enableShutdownHooks();
  await app.listen(Number(env.CHAOS_PORT), '127.0.0.1');
  process.stdout.write(`LISTENING ${env.CHAOS_PORT}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`chaos app failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
