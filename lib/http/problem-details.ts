import { HttpException } from '@nestjs/common';

/** Media type of RFC 9457 problem details. */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** The kinds of problem the interceptor reports, each with its status. */
export const IDEMPOTENCY_PROBLEMS = {
  'invalid-key': { status: 400, title: 'Invalid idempotency key' },
  'missing-key': { status: 400, title: 'Idempotency key required' },
  'key-reused': { status: 422, title: 'Idempotency key reused with a different request' },
  'in-progress': { status: 409, title: 'A request with this idempotency key is in progress' },
  'store-unavailable': { status: 503, title: 'Idempotency store unavailable' },
} as const;

/** A problem kind. */
export type IdempotencyProblemType = keyof typeof IDEMPOTENCY_PROBLEMS;

/** RFC 9457 body. */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
}

/**
 * An HTTP error whose body is RFC 9457 problem details. The interceptor sets its headers (content type,
 * `Retry-After`) on the response before throwing it; the module's filter sends the body as problem+json.
 */
export class IdempotencyProblemException extends HttpException {
  /** A stable code for the problem kind, e.g. `HTTP_KEY_REUSED` (`HTTP_` + the problem type in upper snake case). */
  readonly code: string;

  constructor(
    readonly problemType: IdempotencyProblemType,
    detail: string,
    readonly headers: Record<string, string> = {},
  ) {
    const { status, title } = IDEMPOTENCY_PROBLEMS[problemType];
    const body: ProblemDetails = { type: `urn:nestjs-idempotency:problem:${problemType}`, title, status, detail };
    super(body, status);
    this.code = `HTTP_${problemType.toUpperCase().replace(/-/g, '_')}`;
  }
}
