// Postgres and Redis as for every suite, then PgBouncer (transaction pooling, a small server pool) in front of
// Postgres: the suites connect through it.
const rootSetup = require('../../test/support/global-setup');
const { startPgBouncer } = require('../../scripts/services');

module.exports = async function globalSetup() {
  await rootSetup();
  const bouncer = await startPgBouncer(`pgbouncer-${process.pid}`, process.env.DATABASE_URL, { poolSize: 8 });
  globalThis.__IDEMPOTENCY_PGBOUNCER__ = bouncer;
  process.env.DATABASE_URL = bouncer.url;
  process.stderr.write(`[pgbouncer] transaction pooling on ${bouncer.url}\n`);
};
