import { MIMEType } from 'node:util';
import type { NextFunction, Request, Response } from 'express';
import { fail } from '../../domain/errors';
import type { ByteBudget } from '../../infra/byteBudget';
import { MCP_SERVERS } from '../../domain/oauth/agent';
import { RequestRefused } from './errors';

/**
 * Checks of a request's framing before any body is read or any route runs (docs/ERRORS.md "Any
 * route: requests the HTTP layer refuses"). Refusals go to errorMiddleware as RequestRefused.
 */

/**
 * RFC 9112 §3.2: an HTTP/1.1 request without Host is refused with 400. The server is created with
 * `requireHostHeader: false` so that this answer, not Node's bare status line, is the one given.
 */
export function requireHostHeader(req: Request, res: Response, next: NextFunction): void {
  if (req.headers.host === undefined && (req.httpVersionMajor > 1 || req.httpVersionMinor >= 1)) {
    res.setHeader('Connection', 'close');
    next(new RequestRefused(400, 'bad_request', 'An HTTP/1.1 request must carry a Host header'));
    return;
  }
  next();
}

export const JSON_TYPES = ['application/json', 'application/*+json'];
const FORM_TYPES = [...JSON_TYPES, 'application/x-www-form-urlencoded'];

/**
 * The media types each route reads; every other route reads JSON only. The OAuth endpoints and the
 * confirmation page take the forms browsers and OAuth clients post (JSON too); the unsubscribe
 * page takes any body (RFC 8058 one-click is posted as multipart/form-data or a form, and the
 * page's button as a form). The agent-tool servers' transport checks the type itself and answers
 * in JSON-RPC's shape (docs/MCP.md).
 */
function typesReadAt(path: string): string[] | 'any' {
  const p = path.toLowerCase().replace(/\/$/, '');
  if (p === '/api/oauth2/token' || p === '/api/oauth2/revoke' || p === '/api/oauth2/consent' || p === '/free-recipients/confirm') return FORM_TYPES;
  if (/^\/comm-api\/u\/[^/]+$/.test(p) || MCP_PATHS.has(p)) return 'any';
  return JSON_TYPES;
}
const MCP_PATHS = new Set(MCP_SERVERS.map((s) => s.path.toLowerCase()));

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** A body is there when it has a length above 0 or is chunked (a POST without one, or with Content-Length: 0, has none). */
function carriesBody(req: Request): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = Number(req.headers['content-length']);
  return Number.isFinite(length) && length > 0;
}

/**
 * A body in a media type the route does not read is refused with 415 `unsupported_media_type`:
 * unparsed, it used to vanish (req.body undefined), and a route whose body is optional ran on its
 * defaults (an export queued, a key created) for a request that asked for something else. JSON is
 * UTF-8 (RFC 8259 §8.1): another charset is 415 `unsupported_encoding` (body-parser would decode
 * UTF-16 and UTF-32 and fail to parse them as 400 `invalid_json`).
 */
export function refuseUnreadBody(req: Request, _res: Response, next: NextFunction): void {
  if (!BODY_METHODS.has(req.method) || !carriesBody(req)) {
    next();
    return;
  }
  const types = typesReadAt(req.path);
  if (types === 'any') {
    next();
    return;
  }
  const given = req.headers['content-type'];
  // type-is, the matcher body-parser uses: a type it accepts here is one it parses.
  if (given === undefined || !req.is(types)) {
    next(new RequestRefused(415, 'unsupported_media_type', `This route reads ${types.filter((t) => t !== 'application/*+json').join(' or ')} bodies (Content-Type: ${given ?? 'none'})`));
    return;
  }
  if (req.is(JSON_TYPES)) {
    const charset = charsetOf(given);
    if (charset !== null && charset !== 'utf-8' && charset !== 'utf8') {
      next(new RequestRefused(415, 'unsupported_encoding', `JSON bodies are UTF-8 (charset ${charset} given)`));
      return;
    }
  }
  next();
}

function charsetOf(contentType: string): string | null {
  // Parameters follow a ';': most requests carry none, and parsing the type costs more than the rest of this check.
  if (!contentType.includes(';')) return null;
  try {
    return new MIMEType(contentType).params.get('charset')?.toLowerCase() ?? null;
  } catch {
    return null;
  }
}

/**
 * The process's budget of request bodies being read (HTTP_MAX_BUFFERED_BYTES, docs/ERRORS.md
 * "Any route: requests the HTTP layer refuses"). The parsers hold a body in memory until it is
 * parsed, and the route its parsed copy until it answers: each request is bounded (12 MB), their
 * sum was not, and a few hundred slow 12 MB uploads, credentials or none (the body is read before
 * the route checks them), took the heap and every request of the process with it.
 *
 * A request with a body reserves its `Content-Length` (the route's largest body when it is chunked
 * or compressed, whose inflated size is what the parser holds) before a byte of it is read, and
 * gives it back when its answer is sent or its connection closes. A reservation that does not fit
 * is 503 `server_busy` with `Retry-After: 1`, its body left unread, so the connection closes after
 * the answer. A reservation, not a count of the bytes as they arrive: a client that declares 12 MB
 * and trickles it holds 12 MB of room, which is what it could hold of the heap.
 */
export function bodyBudget(budget: ByteBudget, largestBody: number, onRefused: () => void): (req: Request, res: Response, next: NextFunction) => void {
  return (req, res, next) => {
    if (!BODY_METHODS.has(req.method) || !carriesBody(req)) {
      next();
      return;
    }
    const declared = Number(req.headers['content-length']);
    const encoding = req.headers['content-encoding'];
    const plain = encoding === undefined || encoding.trim().toLowerCase() === 'identity';
    const bytes = plain && Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, largestBody) : largestBody;
    if (!budget.take(bytes)) {
      onRefused();
      res.setHeader('Connection', 'close');
      next(fail('server_busy', 503, 'This process holds as many request bodies as it has room for; nothing was read or done', {
        nextAction: 'Retry in a second', details: { retryAfterSeconds: 1 },
      }));
      return;
    }
    // A response's 'close' comes once, whether it was sent or its connection went first.
    res.once('close', () => budget.give(bytes));
    next();
  };
}
