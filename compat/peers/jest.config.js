// Runs the core suites with the peer versions installed in compat/peers/<COMPAT_PEERS>/node_modules: typeorm, bullmq
// and ioredis resolve from that folder (resolver.js), everything else from the root.
// Usage (scripts/run-tests.js does this): COMPAT_PEERS=oldest npx jest --config compat/peers/jest.config.js
const path = require('node:path');

const set = process.env.COMPAT_PEERS;
if (!set) throw new Error('COMPAT_PEERS must name a folder of compat/peers (oldest, v5-latest, v6-oldest)');
const ROOT = path.resolve(__dirname, '..', '..');

/** @type {import('jest').Config} */
module.exports = {
  rootDir: ROOT,
  testTimeout: 60000,
  globalSetup: '<rootDir>/test/support/global-setup.js',
  globalTeardown: '<rootDir>/test/support/global-teardown.js',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', diagnostics: false }] },
  moduleFileExtensions: ['ts', 'js', 'json'],
  resolver: path.join(__dirname, 'resolver.js'),
  // The cases that touch the peers' APIs: the Redis cache (ioredis), workflows (bullmq), TypeORM's DataSource,
  // transactions and migrations; plus which versions were actually loaded. The rest of the engine is the same code.
  testMatch: [
    '<rootDir>/test/http/replay.e2e-spec.ts',
    '<rootDir>/test/inbox/inbox.e2e-spec.ts',
    '<rootDir>/test/workflow/steps.e2e-spec.ts',
    '<rootDir>/test/module/module-setup.e2e-spec.ts',
    '<rootDir>/test/storage/migrations.e2e-spec.ts',
    '<rootDir>/test/storage/peer-versions.e2e-spec.ts',
    '<rootDir>/test/transaction/cls-transactional.e2e-spec.ts',
    '<rootDir>/test/transaction/start-with-first-statement.e2e-spec.ts',
  ],
};
