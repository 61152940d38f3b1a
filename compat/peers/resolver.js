'use strict';
// Jest resolver for compat/peers: `typeorm`, `bullmq`, `ioredis` and `pg` (and their subpaths) required from the library,
// the tests or the root's node_modules (e.g. @nestjs/typeorm) resolve from compat/peers/<COMPAT_PEERS>/; requests
// from inside that folder resolve as npm laid it out (bullmq keeps its own nested ioredis, if any). Everything else
// resolves as usual. A set that does not pin one of them (pg, in all but `oldest`) gets the root's, found further up.
const path = require('node:path');

const PEERS = new Set(['typeorm', 'bullmq', 'ioredis', 'pg']);
const dir = path.join(__dirname, process.env.COMPAT_PEERS || '');

module.exports = (request, options) => {
  const name = request.split('/')[0];
  if (PEERS.has(name) && !options.basedir.startsWith(dir + path.sep)) {
    return options.defaultResolver(request, { ...options, basedir: dir });
  }
  return options.defaultResolver(request, options);
};
