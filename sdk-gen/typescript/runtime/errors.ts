// runtime/errors.ts: the SDK's typed errors. An answer of 4xx/5xx becomes a FleetgateError built
// from its problem+json (type, title, detail, field errors, request id); the class says the kind,
// so callers write `if (e instanceof NotFoundError)`. A request that got no answer at all is a
// ConnectionError.

/** One invalid field of a 422 answer. */
export interface FieldError {
  pointer?: string;
  field?: string;
  detail?: string;
  [key: string]: unknown;
}

/** An RFC 9457 problem document as fleetgate sends it. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  requestId?: string;
  errors?: FieldError[];
  [key: string]: unknown;
}

export class FleetgateError extends Error {
  readonly status: number;
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly instance: string;
  readonly requestId: string;
  readonly errors: FieldError[];
  readonly problem: Problem;
  /** The Retry-After of the answer, in milliseconds, when it had one. */
  readonly retryAfterMs?: number;

  constructor(problem: Problem, retryAfterMs?: number) {
    super(`${problem.status} ${problem.title}${problem.detail ? `: ${problem.detail}` : ''}` +
      (problem.requestId ? ` (request ${problem.requestId})` : ''));
    this.name = new.target.name;
    this.status = problem.status;
    this.type = problem.type;
    this.title = problem.title;
    this.detail = problem.detail ?? '';
    this.instance = problem.instance ?? '';
    this.requestId = problem.requestId ?? '';
    this.errors = Array.isArray(problem.errors) ? problem.errors : [];
    this.problem = problem;
    this.retryAfterMs = retryAfterMs;
  }
}

export class BadRequestError extends FleetgateError {}
export class UnauthorizedError extends FleetgateError {}
export class ForbiddenError extends FleetgateError {}
export class NotFoundError extends FleetgateError {}
export class ConflictError extends FleetgateError {}
export class PreconditionFailedError extends FleetgateError {}
export class ValidationError extends FleetgateError {}
export class RateLimitedError extends FleetgateError {}
export class ServerError extends FleetgateError {}
export class UnavailableError extends ServerError {}

/** No answer: refused, reset, DNS, or aborted by the caller. */
export class ConnectionError extends Error {
  readonly cause?: unknown;
  constructor(message: string, cause?: unknown) {
    super(message);
    this.name = 'ConnectionError';
    this.cause = cause;
  }
}

const byStatus: Record<number, typeof FleetgateError> = {
  400: BadRequestError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  409: ConflictError,
  412: PreconditionFailedError,
  422: ValidationError,
  429: RateLimitedError,
  503: UnavailableError,
};

/** The typed error for an answer; `body` is its parsed JSON (a problem) or its text. */
export function errorFromAnswer(status: number, body: unknown, requestId: string,
                                retryAfterMs?: number, instance = ''): FleetgateError {
  const p: Problem = body && typeof body === 'object' && typeof (body as Problem).type === 'string'
    ? { ...(body as Problem) }
    : { type: 'about:blank', title: `HTTP ${status}`, status,
        detail: typeof body === 'string' ? body.slice(0, 500) : undefined, instance };
  p.status = typeof p.status === 'number' ? p.status : status;
  if (!p.requestId && requestId) p.requestId = requestId;
  const Cls = byStatus[status] ?? (status >= 500 ? ServerError : FleetgateError);
  return new Cls(p, retryAfterMs);
}
