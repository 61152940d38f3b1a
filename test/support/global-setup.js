// Starts Postgres and Redis for the suite unless DATABASE_URL and REDIS_URL are given.
const { ensureServices } = require('../../scripts/services');

module.exports = async function globalSetup() {
  if (process.env.DATABASE_URL && process.env.REDIS_URL) return;
  const services = await ensureServices(`test-${process.pid}`, { ephemeral: true });
  Object.assign(process.env, services.env);
  globalThis.__IDEMPOTENCY_SERVICES__ = services;
};
