module.exports = async function globalTeardown() {
  const services = globalThis.__IDEMPOTENCY_SERVICES__;
  if (services) await services.stop();
};
