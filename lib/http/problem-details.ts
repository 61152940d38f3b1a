import { HttpException } from '@nestjs/common';

/** Media type of RFC 9457 problem details. */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * Where problem `type` URIs point by default: the README's "Problem types" section on npm, one anchor per
 * problem (`…#user-content-problem-key-reused`: npm prefixes heading anchors with `user-content-`, GitHub
 * accepts both). Set `http.problemTypeBase` to point them at your own documentation instead.
 */
export const DEFAULT_PROBLEM_TYPE_BASE = 'https://www.npmjs.com/package/nestjs-idempotency#user-content-problem-';

/** The kinds of problem the interceptor reports, each with its status. The keys are stable codes. */
export const IDEMPOTENCY_PROBLEMS = {
  'invalid-key': { status: 400, title: 'Invalid idempotency key' },
  'missing-key': { status: 400, title: 'Idempotency key required' },
  'scope-too-long': { status: 400, title: 'Idempotency scope too long' },
  'body-not-fingerprintable': { status: 415, title: 'Request body cannot be fingerprinted' },
  'key-reused': { status: 422, title: 'Idempotency key reused with a different request' },
  'in-progress': { status: 409, title: 'A request with this idempotency key is in progress' },
  'transaction-conflict': { status: 409, title: 'The request\'s transaction conflicted with a concurrent one' },
  'transaction-aborted': { status: 500, title: 'The request\'s transaction was aborted by a statement that failed' },
  'store-unavailable': { status: 503, title: 'Idempotency store unavailable' },
} as const;

/** A problem kind: its stable code, also sent as the body's `code` member. */
export type IdempotencyProblemType = keyof typeof IDEMPOTENCY_PROBLEMS;

/** RFC 9457 body, with the stable `code` as an extension member. */
export interface ProblemDetails {
  /** A URL of the documentation of this problem: `http.problemTypeBase` followed by `code`. */
  type: string;
  title: string;
  status: number;
  detail: string;
  /** The problem's stable code, e.g. `key-reused`: branch on this rather than on `type`. */
  code: IdempotencyProblemType;
}

/**
 * An HTTP error whose body is RFC 9457 problem details. The interceptor sets its headers (content type,
 * `Retry-After`) and its `type` base on the response before throwing it; the module's filter sends the
 * body as problem+json.
 */
export class IdempotencyProblemException extends HttpException {
  /** A stable code for the problem kind, e.g. `HTTP_KEY_REUSED` (`HTTP_` + the problem type in upper snake case). */
  readonly code: string;
  private readonly body: ProblemDetails;

  constructor(
    readonly problemType: IdempotencyProblemType,
    detail: string,
    readonly headers: Record<string, string> = {},
    typeBase: string = DEFAULT_PROBLEM_TYPE_BASE,
  ) {
    const { status, title } = IDEMPOTENCY_PROBLEMS[problemType];
    const body: ProblemDetails = { type: `${typeBase}${problemType}`, title, status, detail, code: problemType };
    super(body, status);
    // Nest would name it "Idempotency Problem Exception"; an app's filter that logs or sends `message` gets the detail.
    this.message = detail;
    this.code = `HTTP_${problemType.toUpperCase().replace(/-/g, '_')}`;
    this.body = body;
  }

  /** Points `type` at another documentation base (`http.problemTypeBase`). */
  withTypeBase(typeBase: string): this {
    this.body.type = `${typeBase}${this.problemType}`;
    return this;
  }
}
