import { isUtf8 } from 'node:buffer';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { NextFunction, Request, Response } from 'express';
import { ValidateError } from '@tsoa/runtime';
import { InvalidEventDataError, WrongExpectedRevisionError } from '../../domain/eventStore';
import { jsonProblem } from '../../domain/storableJson';
import { isDomainError } from '../../domain/errors';
import { unavailableCode } from '../../infra/unavailable';
import { ctxOf } from './context';

/**
 * The HTTP error table: every error becomes one envelope
 *   { success: false, error, code, message, nextAction?, ...details }
 * where `error` is the text the spec names for that failure (e.g. "Invalid API key format") and
 * `code` the stable machine code (docs/ERRORS.md). Nothing else writes error bodies.
 */
const ERROR_TEXT: Record<string, string> = {
  invalid_api_key: 'Invalid API key format',
  from_domain_mismatch: 'From address domain does not match',
  DOMAIN_DNS_INCOMPLETE: 'Domain DNS setup incomplete',
  validation_error: 'Validation error',
  DISALLOWED_HEADERS: 'Disallowed headers',
  invalid_token: 'Unauthorized',
  token_expired: 'Unauthorized',
  insufficient_scope: 'Forbidden',
  motor_block_forbidden: 'Forbidden',
  not_found: 'Not found',
  event_store_unavailable: 'Service unavailable',
  database_unavailable: 'Service unavailable',
  internal_error: 'Internal error',
  concurrent_update: 'Conflict',
  // sandbox and free recipients (docs/SANDBOX.md)
  invalid_handle: 'Invalid handle',
  sandbox_handle_taken: 'Sandbox handle taken',
  sandbox_not_provisioned: 'Sandbox not provisioned',
  sandbox_already_converted: 'Sandbox already converted',
  allowlist_too_large: 'Allowlist too large',
  sandbox_recipient_not_allowed: 'Recipient not on the sandbox allowlist',
  recipient_not_permitted: 'Recipient not permitted',
  own_address: 'Own address',
  recipient_limit: 'Recipient limit reached',
  // account Motor Blocks (docs/BLOCKS.md)
  confirmation_required: 'Confirmation required',
  motor_block_id_conflict: 'Motor Block id conflict',
  invalid_idempotency_key: 'Invalid Idempotency-Key',
  idempotency_conflict: 'Idempotency conflict',
  motor_block_not_found: 'Not found',
  motor_block_deletion_not_found: 'Not found',
  motor_block_not_authorized: 'Forbidden',
  motor_block_type_not_allowed: 'Motor Block type not allowed',
  motor_block_limit_reached: 'Motor Block limit reached',
  motor_block_name_conflict: 'Motor Block name conflict',
  motor_block_must_be_inactive: 'Motor Block must be inactive',
  motor_block_history_present: 'Motor Block history present',
  history_unknown: 'Service unavailable',
  motor_block_domain_required: 'Motor Block domain required',
  motor_block_delete_in_progress: 'Motor Block deletion in progress',
  domain_not_verified: 'Domain not verified',
  // domains (docs/DOMAINS.md)
  domain_already_added: 'Domain already added',
  domain_not_found: 'Not found',
  invalid_domain: 'Invalid domain',
  // A well-formed name the operator keeps (SERVICE_DOMAIN, BOUNCE_DOMAIN): not an invalid one.
  domain_reserved: 'Domain reserved',
  invalid_dkim_mode: 'Validation error',
  dkim_rotation_not_available: 'Conflict',
};

// The 503 code of a database or event store that is away or did not answer in time (infra/unavailable.ts).
export { unavailableCode };

export function errorBody(code: string, message: string, extra: { nextAction?: string; details?: Record<string, unknown> } = {}) {
  return {
    success: false as const,
    error: ERROR_TEXT[code] ?? code,
    code,
    message,
    ...(extra.nextAction ? { nextAction: extra.nextAction } : {}),
    ...(extra.details ?? {}),
  };
}

/**
 * A request the HTTP layer refuses before any route runs (read-api/http/requestChecks.ts: media
 * type, charset, Host), raised to errorMiddleware like the body parser's errors.
 */
export class RequestRefused extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
    this.name = 'RequestRefused';
  }
}

/**
 * The OAuth endpoints that take a body from OAuth clients: every error of theirs is an RFC 6749
 * §5.2 body (RFC 7009 §2.2.1 for revocation), those of the HTTP layer too (`invalid_request`),
 * since OAuth client libraries read `error`, not Motor's envelope. Express matches paths ignoring
 * case and a trailing slash.
 */
const OAUTH_BODY_ENDPOINTS = new Set(['/api/oauth2/token', '/api/oauth2/revoke']);
function isOAuthBodyEndpoint(req: Request): boolean {
  return OAUTH_BODY_ENDPOINTS.has(req.path.toLowerCase().replace(/\/$/, ''));
}

/**
 * Answers a request the HTTP layer refused: the envelope, or on the OAuth token and revocation
 * endpoints `invalid_request` in RFC 6749's shape, with 400 for what is malformed and the HTTP
 * status kept for a body too large (413) or in a type or charset not read (415).
 */
function refuse(req: Request, res: Response, status: number, code: string, message: string): void {
  if (isOAuthBodyEndpoint(req)) {
    res.setHeader('Cache-Control', 'no-store');
    res.status(status === 413 || status === 415 ? status : 400).json({ error: 'invalid_request', error_description: message });
    return;
  }
  res.status(status).json(errorBody(code, message));
}

/** Deepest nesting a JSON request body may have (no route takes more than a few levels). */
export const MAX_BODY_DEPTH = 32;

/**
 * After the JSON parser: a body nested past MAX_BODY_DEPTH, or with a string holding U+0000 or an
 * unpaired surrogate (valid JSON text, but nothing downstream can store or mail it: see
 * domain/storableJson.ts), is refused with 400 `invalid_json` before any route sees it; a query
 * string with an encoded U+0000 with 400 `invalid_query` (percent-decoding never yields an
 * unpaired surrogate: malformed sequences decode to U+FFFD).
 */
export function refuseUnstorableInput(req: Request, res: Response, next: NextFunction): void {
  const q = req.url.indexOf('?');
  if (q !== -1 && /%00/.test(req.url.slice(q))) {
    refuse(req, res, 400, 'invalid_query', 'The query string holds U+0000 (%00)');
    return;
  }
  if (typeof req.body === 'object' && req.body !== null) {
    const problem = jsonProblem(req.body, MAX_BODY_DEPTH);
    if (problem !== null) {
      refuse(req, res, 400, 'invalid_json', `Request body is not acceptable JSON: ${problem}`);
      return;
    }
  }
  next();
}

/** body-parser `verify` hook of the JSON parsers: the bytes must be UTF-8 (RFC 8259 §8.1), not decoded with U+FFFD in place of what is not. */
export function requireUtf8(_req: unknown, _res: unknown, body: Buffer): void {
  if (!isUtf8(body)) throw Object.assign(new Error('Request body is not valid UTF-8'), { status: 400, type: 'entity.encoding.invalid' });
}

/**
 * The body parser's client errors by their `type` (body-parser sets the status: 400, 413 or 415;
 * `status` overrides it), with the message to give when its own would say less. Other 4xx
 * http-errors are `bad_request`.
 */
const PARSER_ERRORS: Record<string, { code: string; message?: string; status?: number }> = {
  'entity.parse.failed': { code: 'invalid_json', message: 'Request body is not valid JSON' },
  'entity.encoding.invalid': { code: 'invalid_json', message: 'Request body is not valid UTF-8' },
  'entity.too.large': { code: 'payload_too_large', message: 'Request body is too large' },
  'encoding.unsupported': { code: 'unsupported_encoding' },
  'charset.unsupported': { code: 'unsupported_encoding' },
  // The OAuth form bodies' parameterLimit (read-api/app.ts): too many fields is a malformed request, not a large one.
  'parameters.too.many': { code: 'bad_request', status: 400, message: 'The form body has too many parameters' },
  // The client closed the connection mid-body: the body is incomplete (when an answer can still be written).
  'request.aborted': { code: 'invalid_body', message: 'The body ended before its Content-Length' },
  'request.size.invalid': { code: 'invalid_body' },
};

interface RateLimitDetails { limit: number; remaining: number; reset: number }

// Express recognises error middleware by its four parameters.
// eslint-disable-next-line @typescript-eslint/no-unused-vars
export function errorMiddleware(err: unknown, req: Request, res: Response, _next: NextFunction): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  if (isDomainError(err)) {
    const { rateLimit, ...details } = (err.details ?? {}) as { rateLimit?: RateLimitDetails; retryAfterSeconds?: number };
    if (typeof details.retryAfterSeconds === 'number') res.setHeader('Retry-After', String(details.retryAfterSeconds));
    if (rateLimit) {
      res.setHeader('RateLimit-Limit', String(rateLimit.limit));
      res.setHeader('RateLimit-Remaining', String(rateLimit.remaining));
      res.setHeader('RateLimit-Reset', String(rateLimit.reset));
    }
    // A 502 is something Motor relies on that failed this request (a system mail not accepted:
    // SYSTEM_MAIL_FROM's block stopped, its quota, the store): the caller is told, and so is the
    // operator, who would otherwise see users refused with nothing in the log. 503s are load
    // shedding and shutdown, counted and logged where they are decided.
    if (err.status === 502) ctxOf(req).logger.warn({ reqId: req.id, code: err.code, reason: err.message, details }, 'answered 502: a dependency failed this request');
    res.status(err.status).json(errorBody(err.code, err.message, { nextAction: err.nextAction, details }));
    return;
  }
  if (err instanceof ValidateError) {
    // A bad query or path parameter of a read is a bad request (400 invalid_query, SPEC "Public
    // API errors"); 422 is for request bodies (send and token-minting validation). tsoa's field
    // names do not reliably say body from query (array items lose the prefix), the method does.
    if (req.method === 'GET' || req.method === 'HEAD') {
      const fields = Object.entries(err.fields).map(([field, v]) => ({ field, message: v.message }));
      res.status(400).json(errorBody('invalid_query', fields.map((f) => `${f.field}: ${f.message}`).join('; ') || 'Invalid request parameters', { details: { fields } }));
      return;
    }
    const fields = Object.entries(err.fields).map(([field, v]) => ({ field: field.replace(/^(requestBody|body)\.?/, '') || 'body', message: v.message }));
    if (isOAuthBodyEndpoint(req)) {
      refuse(req, res, 400, 'validation_error', fields.map((f) => `${f.field}: ${f.message}`).join('; ') || 'Invalid request');
      return;
    }
    // Account and dashboard routes (/api/... outside /api/public) answer 400 for a bad body (docs/AUTH.md).
    if (req.path.startsWith('/api/') && !req.path.startsWith('/api/public/')) {
      res.status(400).json(errorBody('validation_error', fields.map((f) => `${f.field}: ${f.message}`).join('; ') || 'Invalid request', { details: { fields } }));
      return;
    }
    res.status(422).json(errorBody('validation_error', fields.map((f) => `${f.field}: ${f.message}`).join('; ') || 'Invalid request', { details: { fields } }));
    return;
  }
  if (err instanceof RequestRefused) {
    refuse(req, res, err.status, err.code, err.message);
    return;
  }
  const e = err as { type?: string; status?: number; statusCode?: number; expose?: boolean; message?: string };
  // A path segment that is not valid percent-encoding (the router's decodeURIComponent failed).
  if (err instanceof URIError) {
    res.status(400).json(errorBody('invalid_path', 'The request path is not valid percent-encoding'));
    return;
  }
  // Something that slipped past refuseUnstorableInput (e.g. a value a route derived) and that the
  // event store refused on its own: nothing was written.
  if (err instanceof InvalidEventDataError) {
    res.status(400).json(errorBody('invalid_json', `Request holds text that cannot be stored: ${err.problem}`));
    return;
  }
  // A lost optimistic-concurrency race that no command turned into its own 409 `<what>_conflict`
  // (commands/decideOnStream.ts): another request changed the same thing, nothing of this one was
  // appended, and trying again is the answer. A client's timing is never a 500.
  if (err instanceof WrongExpectedRevisionError) {
    res.status(409).json(errorBody('concurrent_update', 'What this request changes was changed by another request meanwhile; nothing was written', {
      nextAction: 'Read it again and retry the request',
    }));
    return;
  }
  // A PostgreSQL that cannot be reached, or does not answer in time (infra/db.ts QUERY_TIMEOUT_MS),
  // fails the directory lookup of authentication before the append is tried: with the default
  // store that database IS the event store, so it is the same 503 (never a 500, never a 200). With
  // EVENTSTORE_URL only the read models are down.
  const unavailable = unavailableCode(err, ctxOf(req).config.eventstoreUrl);
  if (unavailable) {
    const what = unavailable === 'event_store_unavailable' ? 'The event store is unavailable' : 'The database is unavailable';
    res.setHeader('Retry-After', '5');
    res.status(503).json(errorBody(unavailable,
      `${what}; ${req.method === 'GET' || req.method === 'HEAD' ? 'retry shortly' : 'nothing was accepted. Retry shortly'}.`));
    return;
  }
  // A client error the HTTP layer raised (http-errors: a 4xx status with expose: true): the body
  // parser's, or a gzip body that does not inflate. Only those: tsoa's authentication wrapper
  // stamps status 401 on whatever its handler threw, a database error too.
  const status = e?.status ?? e?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500 && e?.expose === true) {
    const known = e.type ? PARSER_ERRORS[e.type] : undefined;
    const message = known?.message ?? (status === 400 && !e.type ? 'The request body could not be read (bad Content-Encoding or framing)' : e.message);
    refuse(req, res, known?.status ?? status, known?.code ?? 'bad_request', message ?? 'Bad request');
    return;
  }
  ctxOf(req).logger.error({ err, reqId: req.id }, 'unhandled error');
  res.status(500).json(errorBody('internal_error', 'Internal error'));
}

/**
 * Requests Node's HTTP parser refuses before Express sees them (request line and headers over
 * 16 KiB, malformed HTTP) get the JSON envelope too, instead of Node's bare status line; the
 * connection is closed after it, as Node does.
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  // The response of a request in flight, as Node's own handler finds it (lib/_http_server.js): once
  // its head is on the wire, another answer would corrupt the stream.
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent: boolean } | null })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, code, message] = err.code === 'HPE_HEADER_OVERFLOW'
    ? [431, 'headers_too_large', 'The request line and headers exceed 16 KiB']
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'request_timeout', 'The request did not arrive in time']
      // The client ended its side early: mid-body once the headers were read (a request is in flight), else mid-headers.
      : err.code === 'HPE_INVALID_EOF_STATE' && inFlight
        ? [400, 'invalid_body', 'The body ended before its Content-Length']
        : [400, 'bad_request', 'Malformed HTTP request'];
  const body = JSON.stringify(errorBody(code, message));
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

export function notFoundMiddleware(req: Request, res: Response): void {
  res.status(404).json(errorBody('not_found', `No route ${req.method} ${req.path}`));
}
