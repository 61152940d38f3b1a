// Runs the core suites (HTTP replay and concurrency, the method guard, workflow steps, the HTTP transactional mode,
// a transaction started by its first statement) through a real PgBouncer in transaction pooling: global-setup.js
// starts it in front of the suite's Postgres and points DATABASE_URL at it; unnamed-statements.ts gives every
// IdempotencyModule.forRoot() `postgres.preparedStatements: false`, as an app behind PgBouncer sets it.
// Usage (scripts/run-tests.js does this): npx jest --config compat/pgbouncer/jest.config.js
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');

/** @type {import('jest').Config} */
module.exports = {
  rootDir: ROOT,
  testTimeout: 60000,
  globalSetup: path.join(__dirname, 'global-setup.js'),
  globalTeardown: path.join(__dirname, 'global-teardown.js'),
  setupFiles: [path.join(__dirname, 'unnamed-statements.ts')],
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', diagnostics: false }] },
  moduleFileExtensions: ['ts', 'js', 'json'],
  testMatch: [
    '<rootDir>/test/http/replay.e2e-spec.ts',
    '<rootDir>/test/http/concurrency.e2e-spec.ts',
    '<rootDir>/test/guard/idempotent-method.e2e-spec.ts',
    '<rootDir>/test/workflow/steps.e2e-spec.ts',
    '<rootDir>/test/transaction/exactly-once-http.e2e-spec.ts',
    '<rootDir>/test/transaction/start-with-first-statement.e2e-spec.ts',
  ],
  // Child processes of the guard suite boot the module outside Jest, without the setup file.
  testNamePattern: '^(?!.*across processes)',
};
