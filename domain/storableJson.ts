/**
 * What a JSON value must be to be stored and read back as it was: every string (object keys
 * included) well-formed Unicode without U+0000, no BigInt, and nesting no deeper than a limit
 * (which also stops a cycle). PostgreSQL's jsonb refuses U+0000 and unpaired surrogates (I-JSON,
 * RFC 7493, forbids the latter too); JSON.stringify throws on a BigInt or a cycle. The event store
 * refuses such an event on its own, before it can join a group-commit batch and fail the others,
 * and the HTTP edge refuses such a body with 400 `invalid_json`.
 */

/** Deepest nesting an event's data or metadata may have. */
export const MAX_EVENT_DEPTH = 100;

/** Why `value` cannot be stored as JSON, or null when it can. */
export function jsonProblem(value: unknown, maxDepth: number): string | null {
  return problemOf(value, 0, maxDepth);
}

function problemOf(value: unknown, depth: number, maxDepth: number): string | null {
  switch (typeof value) {
    case 'string':
      return stringProblem(value);
    case 'bigint':
      return 'a BigInt (not representable in JSON)';
    case 'object': {
      if (value === null) return null;
      if (depth >= maxDepth) return `nesting deeper than ${maxDepth} levels`;
      if (Array.isArray(value)) {
        for (const item of value) {
          const p = problemOf(item, depth + 1, maxDepth);
          if (p !== null) return p;
        }
        return null;
      }
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return null; // Date, Buffer: serialised by their own toJSON
      for (const key in value) {
        if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
        const p = stringProblem(key) ?? problemOf((value as Record<string, unknown>)[key], depth + 1, maxDepth);
        if (p !== null) return p;
      }
      return null;
    }
    default:
      return null;
  }
}

function stringProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'U+0000 in a string';
  if (!s.isWellFormed()) return 'an unpaired UTF-16 surrogate in a string';
  return null;
}

/**
 * Text from outside (a decoded header, a remote server's reply) as an event can hold it: U+0000
 * dropped, at most `max` UTF-16 units without cutting a surrogate pair in two, and any unpaired
 * surrogate left (an odd UTF-16 encoded-word) replaced by U+FFFD.
 */
export function storableText(value: string, max = Infinity): string {
  let s = value.includes('\u0000') ? value.replaceAll('\u0000', '') : value;
  if (s.length > max) {
    const last = s.charCodeAt(max - 1);
    s = s.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
  }
  return s.toWellFormed();
}
