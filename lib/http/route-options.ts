import type { IdempotentRouteOptions } from '../interfaces/idempotency-options.interface';
import type { ResolvedHttpOptions } from '../interfaces/resolved-options';
import { resolveRouteOptions } from '../utils/validate-options';

const PROBE_BASE: ResolvedHttpOptions = {
  enabled: true,
  global: true,
  header: 'idempotency-key',
  ttlMs: 1,
  leaseMs: 1,
  required: false,
  methods: new Set(),
  replayHeaders: [],
  ignoreBodyFields: [],
  failOpen: false,
  scopeDefaulted: false,
  problemTypeBase: '',
  waitMs: 0,
  retryableStatuses: new Set(),
  storeServerErrors: false,
  transaction: false,
};

/** Checks `@Idempotent()` options when the decorator is applied to `where` (`Class.method`), so a typo fails at startup. */
export function validateRouteOptions(options: IdempotentRouteOptions, where: string): void {
  resolveRouteOptions(PROBE_BASE, options, where);
}
