/**
 * The one error type of the product. Every failure a caller can act on carries a stable `code`
 * (asserted by tests, documented in docs/ERRORS.md), the HTTP-ish `status` the edges map from, a
 * human `message`, and optionally the `nextAction` a client should take.
 *
 * Edges translate it: HTTP (read-api/http/errors.ts), SMTP (smtp/replies.ts), workers
 * (permanent vs temporary). Nothing below the edges formats a response.
 */
export class DomainError extends Error {
  readonly code: string;
  readonly status: number;
  readonly nextAction?: string;
  /** Extra fields the HTTP edge copies into the body (e.g. retryAfterSeconds). */
  readonly details?: Record<string, unknown>;

  constructor(init: { code: string; status: number; message: string; nextAction?: string; details?: Record<string, unknown> }) {
    super(init.message);
    this.name = 'DomainError';
    this.code = init.code;
    this.status = init.status;
    this.nextAction = init.nextAction;
    this.details = init.details;
  }
}

export const isDomainError = (e: unknown): e is DomainError => e instanceof DomainError;

/** Shorthand used by deciders: `throw fail('validation_error', 422, '...')`. */
export function fail(code: string, status: number, message: string, extra?: { nextAction?: string; details?: Record<string, unknown> }): DomainError {
  return new DomainError({ code, status, message, ...extra });
}
