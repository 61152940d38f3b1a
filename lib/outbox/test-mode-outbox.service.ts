import { Injectable } from '@nestjs/common';
import { IdempotencyConfigError } from '../errors/idempotency-config.error';

/**
 * `OutboxService` under IdempotencyTestingModule: the outbox lives in the caller's Postgres transaction, which test
 * mode does not have, so every call says where to test it instead (the app still resolves and boots).
 */
@Injectable()
export class TestModeOutboxService {
  publish(): Promise<never> {
    return Promise.reject(unavailable('publish'));
  }

  stats(): Promise<never> {
    return Promise.reject(unavailable('stats'));
  }

  messages(): Promise<never> {
    return Promise.reject(unavailable('messages'));
  }

  retry(): Promise<never> {
    return Promise.reject(unavailable('retry'));
  }

  skip(): Promise<never> {
    return Promise.reject(unavailable('skip'));
  }
}

function unavailable(method: string): IdempotencyConfigError {
  return new IdempotencyConfigError([
    `OutboxService.${method}(): IdempotencyTestingModule has no outbox (it writes in your Postgres transaction); ` +
      'mock OutboxService in unit tests, or test publishing against Postgres with IdempotencyModule',
  ]);
}
