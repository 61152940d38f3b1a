const rootTeardown = require('../../test/support/global-teardown');
const { stopPgBouncer } = require('../../scripts/services');

module.exports = async function globalTeardown() {
  await stopPgBouncer(globalThis.__IDEMPOTENCY_PGBOUNCER__);
  await rootTeardown();
};
