import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { IdempotencyProblemException, PROBLEM_CONTENT_TYPE } from './problem-details';

/**
 * Sends the interceptor's problems as `application/problem+json`. Nest's Express adapter rewrites the
 * content type of error objects to `application/json`, so the body goes out as JSON text instead.
 */
@Catch(IdempotencyProblemException)
export class IdempotencyProblemFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(exception: IdempotencyProblemException, host: ArgumentsHost): void {
    const adapter = this.adapterHost.httpAdapter;
    const response: unknown = host.switchToHttp().getResponse();
    adapter.setHeader(response, 'Content-Type', PROBLEM_CONTENT_TYPE);
    for (const [name, value] of Object.entries(exception.headers)) adapter.setHeader(response, name, value);
    adapter.reply(response, JSON.stringify(exception.getResponse()), exception.getStatus());
  }
}
