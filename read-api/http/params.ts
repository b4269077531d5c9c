import type { NextFunction, Request, Response } from 'express';
import { fail } from '../../domain/errors';
import { isUuid } from '../../domain/ids';

/** A whole-number query parameter in [min, max], `fallback` when absent; else 400 validation_error naming it. */
export function intParam(name: string, value: number | undefined, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) throw fail('validation_error', 400, `${name} must be a whole number from ${min} to ${max}`, { details: { field: name } });
  return value;
}

/**
 * Path parameters (tsoa's `{name}`) that hold a uuid on every route that has them. A uuid is
 * case-insensitive (RFC 9562 §4), and Motor stores and names streams by the lower-case spelling,
 * so one written in capitals is put in lower case before any route reads it: the block check, the
 * stream names and the read models all see the id as stored, and the answer echoes it so.
 */
export const UUID_PATH_PARAMS = ['id', 'keyId', 'jobId', 'webhookId', 'listId', 'contactId'] as const;

/**
 * Path parameters left exactly as sent: unsubscribe and tracking tokens are signed strings in which
 * case matters; an `address` (a block's suppression, docs/DELIVERY.md "Suppressions") is matched
 * without regard to case by its handler. Every path parameter of the API is in one list or the other (a unit test reads the
 * OpenAPI document), so a route with a new name has to decide.
 */
export const VERBATIM_PATH_PARAMS = ['token', 'address'] as const;

/** The Express param handler of UUID_PATH_PARAMS: a uuid in capitals becomes lower case; anything else is left for the route to judge. */
export function lowerCaseUuidParam(req: Request, _res: Response, next: NextFunction, value: unknown, name: string): void {
  if (isUuid(value)) req.params[name] = value.toLowerCase();
  next();
}
