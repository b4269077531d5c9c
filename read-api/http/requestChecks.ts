import type { NextFunction, Request, Response } from 'express';
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
