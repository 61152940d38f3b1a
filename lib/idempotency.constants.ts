/** Metadata key of `@Idempotent()`. */
export const IDEMPOTENT_ROUTE_METADATA = 'nestjs-idempotency:route';
/** Metadata key of `@SkipIdempotency()`. */
export const SKIP_IDEMPOTENCY_METADATA = 'nestjs-idempotency:skip';
/** Injection token of the validated module options. */
export const RESOLVED_IDEMPOTENCY_OPTIONS = Symbol('nestjs-idempotency:resolved-options');
/** Header added to replayed responses. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';
/** Metadata key of `@IdempotentMethod()`. */
export const IDEMPOTENT_METHOD_METADATA = 'nestjs-idempotency:method';
/** Header added to a response whose handler ran without idempotency protection (`failOpen` during a store outage). */
export const UNPROTECTED_HEADER = 'Idempotency-Unprotected';
