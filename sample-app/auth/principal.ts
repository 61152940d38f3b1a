import { UnauthorizedException } from '@nestjs/common';
import type { IdempotencyRequest } from '../../lib';

/** The authenticated API client a request acts for, set on `request.user` by BearerTokenGuard. */
export interface Principal {
  clientId: string;
}

/** The principal the auth guard put on the request, if any. */
export function principalOf(request: { [field: string]: unknown }): Principal | undefined {
  const user = request.user as Partial<Principal> | undefined;
  return typeof user?.clientId === 'string' ? { clientId: user.clientId } : undefined;
}

/**
 * The Idempotency-Key scope: the authenticated client, never a value the client picks (a tenant header, a
 * body field). A key is only a secret within its scope: with a global or client-chosen scope, anyone who
 * learns another client's key could send it and be replayed that client's stored response. A keyed
 * request with no principal is refused rather than put in a shared scope.
 */
export function idempotencyScope(request: IdempotencyRequest): string {
  const principal = principalOf(request);
  if (!principal) throw new UnauthorizedException('an Idempotency-Key needs an authenticated client');
  return `client:${principal.clientId}`;
}
