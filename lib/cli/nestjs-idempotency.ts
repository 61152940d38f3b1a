#!/usr/bin/env node
// The package's `bin`: `npx nestjs-idempotency migrate [--check] [--url …] [--schema …]`.
import 'reflect-metadata';
import { migrateCommand } from './migrate-command';

migrateCommand(process.argv.slice(2), process.env).then(
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
