#!/usr/bin/env node
// The package's `bin`: `npx nestjs-idempotency migrate [--check] [--url …] [--schema …]`, and `workflows …` / `keys …`
// (the console's operations, see console-command.ts).
import 'reflect-metadata';
import { consoleCommand } from './console-command';
import { migrateCommand } from './migrate-command';

const args = process.argv.slice(2);
(args[0] === 'workflows' || args[0] === 'keys' ? consoleCommand : migrateCommand)(args, process.env).then(
  ({ code, out, err }) => {
    for (const line of out) process.stdout.write(`${line}\n`);
    for (const line of err) process.stderr.write(`${line}\n`);
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`nestjs-idempotency: ${error instanceof Error ? error.message : String(error)}\n`);
    // Not 1: `migrate --check` uses 1 for "pending migrations", which a pipeline must not read into an outage.
    process.exitCode = 3;
  },
);
