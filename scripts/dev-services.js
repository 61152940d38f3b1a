'use strict';
// Keeps a Postgres and a Redis running for development until interrupted; prints their URLs.
const { ensureServices } = require('./services');

ensureServices('dev').then((services) => {
  process.stdout.write(`export DATABASE_URL=${services.env.DATABASE_URL}\nexport REDIS_URL=${services.env.REDIS_URL}\n`);
  const shutdown = () => void services.stop().then(() => process.exit(0));
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}).catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
