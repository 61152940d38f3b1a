const os = require('node:os');

/** @type {import('jest').Config} */
const tsJest = ['ts-jest', { tsconfig: 'tsconfig.json' }];
module.exports = {
  // Suites start apps and real servers; no test asserts on time, this only bounds a hang.
  testTimeout: 60000,
  // Most suites wait on servers, timers and child processes rather than on the CPU: Jest's default (cores - 1) ran
  // them one at a time on a 2-core CI machine (about 24 min); three at once take about half that.
  maxWorkers: Math.max(os.availableParallelism() - 1, 3),
  globalSetup: '<rootDir>/test/support/global-setup.js',
  globalTeardown: '<rootDir>/test/support/global-teardown.js',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': tsJest },
  moduleFileExtensions: ['ts', 'js', 'json'],
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      transform: { '^.+\\.ts$': tsJest },
      testMatch: ['<rootDir>/lib/**/*.spec.ts', '<rootDir>/sample-app/**/*.spec.ts'],
    },
    {
      displayName: 'e2e',
      testEnvironment: 'node',
      transform: { '^.+\\.ts$': tsJest },
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
      testTimeout: 60000,
    },
  ],
};
