import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { ApiClients } from './api-clients';

/** The console's guard in the demo: any API client's bearer token. A real app would check an operator role. */
@Injectable()
export class ConsoleDemoGuard implements CanActivate {
  constructor(private readonly clients: ApiClients) {}

  canActivate(context: ExecutionContext): boolean {
    const header = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)$/i.exec(header) : null;
    return match !== null && this.clients.authenticate(match[1]) !== undefined;
  }
}
