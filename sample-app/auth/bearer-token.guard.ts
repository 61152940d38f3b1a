import { CanActivate, ExecutionContext, Injectable, UnauthorizedException } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ApiClients } from './api-clients';
import { IS_PUBLIC } from './public.decorator';

interface AuthRequest {
  headers: Record<string, string | string[] | undefined>;
  user?: unknown;
}

/**
 * Registered as APP_GUARD, so every route needs `Authorization: Bearer <token>` unless marked `@Public()`.
 * Sets `request.user`. Guards run before interceptors, so the Idempotency-Key scope can be read from it.
 */
@Injectable()
export class BearerTokenGuard implements CanActivate {
  constructor(
    private readonly clients: ApiClients,
    private readonly reflector: Reflector,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    if (this.reflector.getAllAndOverride<boolean>(IS_PUBLIC, [context.getHandler(), context.getClass()])) return true;
    const request = context.switchToHttp().getRequest<AuthRequest>();
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)$/i.exec(header) : null;
    const principal = match ? this.clients.authenticate(match[1]) : undefined;
    if (!principal) throw new UnauthorizedException('send Authorization: Bearer <token> with a valid API token');
    request.user = principal;
    return true;
  }
}
