import { DomainError, fail } from '../errors';
import { commAddress } from './address';

/**
 * The shape every batch route of the communications API shares (docs/COMMUNICATIONS.md "Batch
 * import", "Importing suppressions"): a body `{<key>: [...]}` of 1 to `maxItems` items, each
 * checked exactly as the single route checks its body, with an outcome per item rather than all or
 * nothing. Pure.
 */

/** An invalid item's error: what the single route would have answered for that body. */
export interface BatchItemError { code: string; message: string; field?: string }

/** What one item of a batch comes to before any stream is read: `add` is decided on its stream next. */
export type BatchPlanItem<T> =
  | { index: number; kind: 'invalid'; email: string | null; error: BatchItemError }
  | { index: number; kind: 'duplicate'; email: string }
  | { index: number; kind: 'add'; email: string; item: T };

export interface BatchShape<T extends { email: string }> {
  /** The body's one property, also the `field` of a whole-call error (`contacts`, `suppressions`). */
  key: string;
  /** One item, in messages (`contact`, `suppression`). */
  noun: string;
  /** The properties an item may have; another is that item's error (the single route's 422). */
  itemKeys: readonly string[];
  maxItems: number;
  /** The single route's check of one body: throws a DomainError (its code, message, `field`). */
  fieldsOf: (raw: Record<string, unknown>) => T;
}

/** An invalid item's address is echoed only when it could be one (RFC 5321 paths are at most 256 octets). */
const ECHO_MAX = 320;

/**
 * The items of a batch body: each checked by `shape.fieldsOf`, exactly as a single add (invalid:
 * its code, message and field), then an address already seen in an earlier valid item marked
 * `duplicate`. The body itself not `{<key>: array}` of 1 to maxItems: 400 validation_error with
 * `field: <key>`, for the whole call.
 */
export function planBatch<T extends { email: string }>(body: unknown, shape: BatchShape<T>): BatchPlanItem<T>[] {
  const { key, noun } = shape;
  const bad = (message: string) => fail('validation_error', 400, message, { details: { field: key } });
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw bad(`The body must be a JSON object {${key}: [...]}`);
  const items = (body as Record<string, unknown>)[key];
  if (!Array.isArray(items)) throw bad(`${key} must be an array of ${key}`);
  if (items.length === 0) throw bad(`${key} must have at least one ${noun}`);
  if (items.length > shape.maxItems) throw bad(`${key} can have at most ${shape.maxItems} ${key} per call`);
  const seen = new Set<string>();
  return items.map((item, index): BatchPlanItem<T> => {
    const raw = item !== null && typeof item === 'object' && !Array.isArray(item) ? (item as Record<string, unknown>) : null;
    const echo = typeof raw?.email === 'string' && raw.email.length <= ECHO_MAX ? commAddress(raw.email) : null;
    const invalid = (error: BatchItemError): BatchPlanItem<T> => ({ index, kind: 'invalid', email: echo, error });
    if (raw === null) return invalid({ code: 'validation_error', message: `A ${noun} must be a JSON object` });
    // The single route refuses another property (422 from the OpenAPI validator); here it is this item's error.
    const extra = Object.keys(raw).find((k) => !shape.itemKeys.includes(k));
    if (extra !== undefined) return invalid({ code: 'validation_error', message: `Unknown property "${extra.slice(0, 50)}" (a ${noun} has ${shape.itemKeys.join(', ')})`, field: extra.slice(0, 50) });
    let fields: T;
    try {
      fields = shape.fieldsOf(raw);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      const field = err.details?.field;
      return invalid({ code: err.code, message: err.message, ...(typeof field === 'string' ? { field } : {}) });
    }
    if (seen.has(fields.email)) return { index, kind: 'duplicate', email: fields.email };
    seen.add(fields.email);
    return { index, kind: 'add', email: fields.email, item: fields };
  });
}
