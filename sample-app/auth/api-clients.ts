import { createHash } from 'node:crypto';
import type { Principal } from './principal';

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/**
 * The API clients and their bearer tokens, from `SAMPLE_API_TOKENS="<token>=<clientId>,…"`. Only token
 * hashes are kept. A real app looks hashed API keys up in its database or verifies a JWT (e.g. with
 * @nestjs/passport); what matters for idempotency is that the principal comes from that check.
 */
export class ApiClients {
  private readonly byTokenHash = new Map<string, Principal>();

  constructor(spec: string | undefined) {
    const pairs = (spec ?? '').split(',').map((pair) => pair.trim()).filter(Boolean);
    for (const pair of pairs) {
      const separator = pair.lastIndexOf('=');
      const token = pair.slice(0, separator).trim();
      const clientId = pair.slice(separator + 1).trim();
      if (separator <= 0 || token.length < 16 || !clientId) {
        throw new Error('SAMPLE_API_TOKENS: expected "<token>=<clientId>" pairs separated by commas, each token at least 16 characters');
      }
      this.byTokenHash.set(sha256(token), { clientId });
    }
    if (this.byTokenHash.size === 0) {
      throw new Error('SAMPLE_API_TOKENS is required: "<token>=<clientId>" pairs separated by commas (npm run demo sets it)');
    }
  }

  /** The client a bearer token belongs to, if any. */
  authenticate(token: string): Principal | undefined {
    return this.byTokenHash.get(sha256(token));
  }
}
