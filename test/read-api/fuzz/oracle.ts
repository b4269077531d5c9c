import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseQuery } from 'node:querystring';
import { encodeBody, Nest, Repeat, type Knowledge, type Operation, type RequestPlan } from './arbitraries';
import { resolveRef } from './openapi';

/**
 * What the documentation says the answers must be, as checks the fuzz test applies to every
 * request: the error codes and statuses docs/ERRORS.md names, the shape of an error body, and
 * which requests must be refused (`mustRefuse`) for what they hold, whatever else they hold.
 */

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * The error codes the documentation names, each with the statuses it is named with: docs/ERRORS.md,
 * and the account table of docs/AUTH.md it refers to. Table rows give `| <status> | <codes> | ...`
 * (`422 / 400` for two); the conflict table's codes are 409; prose gives "<status> `<code>`". The
 * operator CLI's table is left out: its codes are no HTTP answers.
 */
function documentedCodes(): Map<string, Set<number>> {
  const codes = new Map<string, Set<number>>();
  const add = (code: string, statuses: number[]) => {
    const set = codes.get(code) ?? new Set<number>();
    for (const st of statuses) set.add(st);
    codes.set(code, set);
  };
  const read = (file: string) => readFileSync(join(__dirname, '../../../docs', file), 'utf8');
  const collect = (text: string) => {
    for (const line of text.split('\n')) {
      if (line.startsWith('|')) {
        const [first, second] = line.split('|').slice(1, 3);
        const statuses = [...first.matchAll(/\b([45]\d\d)\b/g)].map((m) => Number(m[1]));
        if (statuses.length > 0) for (const m of second.matchAll(/`([A-Za-z][A-Za-z0-9_]*)`/g)) add(m[1], statuses);
        else for (const m of first.matchAll(/`([A-Za-z][A-Za-z0-9_]*)`/g)) add(m[1], [409]);
      }
      for (const m of line.matchAll(/\b([45]\d\d) `([A-Za-z][A-Za-z0-9_]*)`/g)) add(m[2], [Number(m[1])]);
    }
  };
  const errors = read('ERRORS.md');
  const cli = errors.indexOf('## Operator CLI');
  const afterCli = errors.indexOf('\n## ', cli + 1);
  collect(cli === -1 ? errors : errors.slice(0, cli) + (afterCli === -1 ? '' : errors.slice(afterCli)));
  const auth = read('AUTH.md');
  collect(auth.slice(auth.indexOf('## Errors'), auth.indexOf('\n## ', auth.indexOf('## Errors') + 1)));
  return codes;
}
export const DOCUMENTED = documentedCodes();
/** RFC 6749 §5.2, RFC 7009 §2.2.1 and RFC 8707 error codes (docs/OAUTH.md). */
const OAUTH_CODES = new Set(['invalid_request', 'invalid_client', 'invalid_grant', 'unauthorized_client', 'unsupported_grant_type', 'invalid_scope', 'unsupported_token_type', 'invalid_target']);
const OAUTH_BODY_PATHS = new Set(['/api/oauth2/token', '/api/oauth2/revoke']);
/** Routes whose own errors are RFC 6749's `{error, error_description}`: the token and revocation endpoints, the authorization page and its form. */
const OAUTH_ERROR_PATHS = new Set([...OAUTH_BODY_PATHS, '/api/oauth2/authorize', '/api/oauth2/consent']);
/** The token introspection endpoint answers RFC 6750 §3's `{error}` (docs/OAUTH.md "4. GET /api/oauth2/validate"). */
const BEARER_ERROR_PATHS = new Set(['/api/oauth2/validate']);
const BEARER_CODES = new Set(['invalid_request', 'invalid_token', 'insufficient_scope']);
/** Pages for people in a browser: their errors may be HTML (docs/ERRORS.md, docs/OAUTH.md). */
const HTML_PAGES = new Set(['/api/oauth2/authorize', '/api/oauth2/consent', '/free-recipients/confirm', '/comm-api/u/{token}', '/comm-api/t/c/{token}', '/comm-api/t/o/{token}.gif']);
/** Actors of the background work that earlier requests started (delivery, webhooks, exports, campaigns, domain re-checks). */
export const BACKGROUND_ACTOR = /^(worker(:.*)?|campaign:.*|system:domain-health)$/;
/**
 * Refusals that are themselves recorded, by design: the failed attempts that count towards the
 * brute-force lock of a code or a password (docs/AUTH.md "Events", `user-<id>`). Nothing else a
 * refused request appends is allowed.
 */
export const RECORDED_REFUSALS = new Set(['VerificationCodeRejected', 'LoginFailed', 'UserLockedOut']);
/** Reads that write by design: "each page view [of the authorization page] appends OAuthConsentRequested" (docs/OAUTH.md). */
export const WRITING_READS: Record<string, string[]> = { '/api/oauth2/authorize': ['OAuthConsentRequested'] };

/**
 * What the documentation says a request must be refused for, whatever else it holds: the answer
 * must then be a 4xx (`codes`: one of these, when the HTTP layer decides before any route runs).
 * Null when the request may well be accepted. Checked in the order the service checks.
 */
export interface Refusal { why: string; codes?: string[] }

/** Routes that read forms besides JSON, and the one that reads any body (docs/ERRORS.md 415 row). */
const FORM_ROUTES = new Set(['/api/oauth2/token', '/api/oauth2/revoke', '/api/oauth2/consent', '/free-recipients/confirm']);
const ANY_BODY_ROUTES = new Set(['/comm-api/u/{token}']);
const mediaType = (t: string) => t.split(';')[0].trim().toLowerCase();
const isJsonType = (t: string) => mediaType(t) === 'application/json' || /^application\/[^/\s,]+\+json$/.test(mediaType(t));
const charsetOf = (t: string) => /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(t)?.[1].toLowerCase() ?? null;

/** JSON containers deep (the body itself is 1) and whether a string in it (a key or a value) holds U+0000 or an unpaired surrogate. */
export function storability(v: unknown, level = 1): { depth: number; badString: boolean } {
  // Anything past 40 levels is refused for its depth: no need to look further (nor to overflow the stack).
  if (level > 40) return { depth: level, badString: false };
  if (typeof v === 'string') return { depth: level - 1, badString: v.includes('\u0000') || !v.isWellFormed() };
  if (typeof v !== 'object' || v === null) return { depth: level - 1, badString: false };
  let depth = level;
  let badString = false;
  for (const [k, x] of Array.isArray(v) ? v.map((x, i) => [String(i), x] as const) : Object.entries(v)) {
    if (!Array.isArray(v) && (k.includes('\u0000') || !k.isWellFormed())) badString = true;
    const r = storability(x, level + 1);
    depth = Math.max(depth, r.depth);
    badString ||= r.badString;
  }
  return { depth, badString };
}

/** A generated value as the service parses it back (Repeat as its string, Nest as what it nests). */
export function parsedBack(v: unknown): unknown {
  if (v instanceof Repeat) return v.toJSON();
  if (v instanceof Nest) {
    let x = parsedBack(v.inner);
    for (let i = 0; i < v.depth; i++) x = v.kind === 'array' ? [x] : { a: x };
    return x;
  }
  if (Array.isArray(v)) return v.map(parsedBack);
  if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.keys(v).map((k) => [k, parsedBack((v as Record<string, unknown>)[k])]));
  return v;
}

/** Where `value` breaks the published schema (types, enums, required and undeclared properties), or null. Untyped schemas take anything. */
export function schemaViolation(schema: Json, value: unknown, at: string): string | null {
  const s = resolveRef(schema);
  if (!s || value === undefined) return null;
  if (Array.isArray(s.anyOf)) return s.anyOf.some((alt: Json) => schemaViolation(alt, value, at) === null) ? null : `${at}: matches none of its types`;
  if (Array.isArray(s.enum) && !s.enum.includes(value)) return `${at}: not one of ${s.enum.join(', ')}`;
  const type = s.type ?? (s.properties ? 'object' : undefined);
  const isObject = typeof value === 'object' && value !== null && !Array.isArray(value);
  switch (type) {
    case 'string': return typeof value === 'string' ? null : `${at}: not a string`;
    case 'number': return typeof value === 'number' ? null : `${at}: not a number`;
    case 'integer': return Number.isInteger(value) ? null : `${at}: not an integer`;
    case 'boolean': return typeof value === 'boolean' ? null : `${at}: not a boolean`;
    case 'array': {
      if (!Array.isArray(value)) return `${at}: not an array`;
      for (const [i, x] of value.entries()) { const v = schemaViolation(s.items, x, `${at}[${i}]`); if (v) return v; }
      return null;
    }
    case 'object': {
      if (!isObject) return `${at}: not an object`;
      const props = (s.properties ?? {}) as Record<string, Json>;
      for (const r of (s.required ?? []) as string[]) if (!(r in (value as object))) return `${at}.${r}: missing`;
      for (const [k, x] of Object.entries(value as object)) {
        if (k in props) { const v = schemaViolation(props[k], x, `${at}.${k}`); if (v) return v; continue; }
        if (s.additionalProperties === false) return `${at}.${k}: not a property of the schema`;
        if (typeof s.additionalProperties === 'object') { const v = schemaViolation(s.additionalProperties, x, `${at}.${k}`); if (v) return v; }
      }
      return null;
    }
    default: return null;
  }
}

const safeDecode = (v: string): string | null => { try { return decodeURIComponent(v); } catch { return null; } };

/** An event-stream id of the PostgreSQL store: `<tx_id>:<global_position>` (xid8, bigint), optionally `/<messageId>/<index>`. */
function isStreamEventId(id: string): boolean {
  const m = /^(\d+):(\d+)(\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\/\d{1,6})?$/i.exec(id);
  return m !== null && m[1].length <= 20 && m[2].length <= 19 && BigInt(m[1]) <= 2n ** 64n - 1n && BigInt(m[2]) <= 2n ** 63n - 1n;
}
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The documented upper bounds of count parameters (SPEC "Endpoints", docs/COMMUNICATIONS.md, docs/SMTP.md, docs/ERRORS.md). */
const QUERY_MAXIMA: Record<string, number> = {
  '/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}/deliveries limit': 200,
  '/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}/stats hours': 168,
  '/api/public/v1/motor-blocks/{id}/deliverability limit': 200,
  '/api/public/v1/motor-blocks/{id}/providers limit': 200,
  '/api/public/v1/motor-blocks/{id}/error-codes limit': 200,
  '/api/public/v1/motor-blocks/{id}/exports/preview limit': 500,
  '/api/public/v1/motor-blocks/{id}/smtp-auth-failures limit': 1000,
  '/api/motor-blocks/{id}/smtp-auth-failures limit': 1000,
  '/comm-api/api/lists limit': 100,
  '/comm-api/api/lists/{listId}/contacts limit': 500,
  '/comm-api/api/suppressions limit': 500,
  '/comm-api/api/analytics/overview days': 90,
  '/comm-api/api/tracking/events limit': 500,
  '/comm-api/api/campaigns limit': 100,
  '/comm-api/api/campaigns/{id}/messages limit': 500,
};

/** How a number in a query string is written (read-api/http/tsoaArgs.ts): decimal digits, not `1e1`, `+1` or `1.0`. */
const DECIMAL_RE = /^-?[0-9]+$/;

/**
 * Body rules SPEC "Endpoints" and docs/ERRORS.md state for a route, with the code they name: what
 * a body that breaks them must get (pinned when nothing before the body refused the request).
 */
const SPEC_BODY_RULES: Partial<Record<string, (b: Record<string, unknown>) => Refusal | null>> = {
  // Send API: "422 Validation error: from, to or subject missing, or neither text nor html"; fromName max 78.
  '/v1/send': (b) => {
    for (const f of ['from', 'to', 'subject']) if (!(f in b)) return { why: `send without ${f}`, codes: ['validation_error'] };
    if (!('text' in b) && !('html' in b)) return { why: 'send with neither text nor html', codes: ['validation_error'] };
    if (typeof b.fromName === 'string' && b.fromName.length > 78) return { why: 'fromName over 78 characters', codes: ['validation_error'] };
    return null;
  },
};
// Token minting: "motorBlockId (uuid, required), ttlSeconds (integer, 60 to 900)"; 422 validation error.
const mintRule = (b: Record<string, unknown>): Refusal | null => {
  if (typeof b.motorBlockId !== 'string' || !UUID_RE.test(b.motorBlockId)) return { why: 'motorBlockId is not a uuid', codes: ['validation_error'] };
  if ('ttlSeconds' in b && !(Number.isInteger(b.ttlSeconds) && (b.ttlSeconds as number) >= 60 && (b.ttlSeconds as number) <= 900)) return { why: `ttlSeconds ${JSON.stringify(b.ttlSeconds)} is not an integer from 60 to 900`, codes: ['validation_error'] };
  return null;
};
/**
 * A text field's documented bounds (docs/ERRORS.md, docs/COMMUNICATIONS.md): judged only on
 * printable ASCII, where characters, code points and UTF-16 units are one count.
 */
const textRule = (b: Record<string, unknown>, field: string, o: { required?: boolean; max: number; oneLine?: boolean; noControls?: boolean }, code = 'validation_error'): Refusal | null => {
  if (!(field in b)) return o.required ? { why: `${field} missing`, codes: [code] } : null;
  const v = b[field];
  if (typeof v !== 'string') return v === null && !o.required ? null : { why: `${field} is not a string`, codes: [code] };
  const t = v.trim();
  if (o.noControls && /[\x00-\x1f\x7f]/.test(t)) return { why: `${field} holds a control character`, codes: [code] };
  if (o.oneLine && /[\r\n]/.test(v)) return { why: `${field} holds a line break`, codes: [code] };
  if (!/^[\x20-\x7e]*$/.test(v)) return null;
  if (o.required && t.length === 0) return { why: `${field} is empty`, codes: [code] };
  if (t.length > o.max) return { why: `${field} is ${t.length} characters (at most ${o.max})`, codes: [code] };
  return null;
};
const firstOf = (...rs: Array<Refusal | null>): Refusal | null => rs.find((r) => r !== null) ?? null;
SPEC_BODY_RULES['/comm-api/api/lists'] = (b) => firstOf(textRule(b, 'name', { required: true, max: 100, noControls: true }), textRule(b, 'description', { max: 500 }));
SPEC_BODY_RULES['/comm-api/api/suppressions'] = (b) => textRule(b, 'note', { max: 500, noControls: true });
SPEC_BODY_RULES['/comm-api/api/campaigns'] = (b) => firstOf(
  textRule(b, 'name', { required: true, max: 200, noControls: true }), textRule(b, 'from_name', { max: 78, oneLine: true }),
  ...['template_id', 'list_id', 'motor_block_id'].map((f) => (f in b && !(typeof b[f] === 'string' && UUID_RE.test(b[f] as string)) ? { why: `${f} is not a uuid`, codes: ['validation_error'] } : null)),
  ...['track_opens', 'track_clicks'].map((f) => (f in b && typeof b[f] !== 'boolean' ? { why: `${f} is not a boolean`, codes: ['validation_error'] } : null)),
);
// Contacts: "fields not an object, over 20 keys, a key not ^[a-z][a-z0-9_]{0,39}$ or reserved (name, identity_name, unsubscribe_url), a value not a string or over 256 characters".
const fieldsRule = (b: Record<string, unknown>, patch: boolean): Refusal | null => {
  if (!('fields' in b)) return null;
  const f = b.fields;
  const bad = { why: `fields ${JSON.stringify(f).slice(0, 80)}`, codes: ['validation_error'] };
  if (patch && f === null) return null;
  if (typeof f !== 'object' || f === null || Array.isArray(f)) return bad;
  const entries = Object.entries(f);
  if (!patch && entries.length > 20) return bad;
  for (const [k, v] of entries) {
    if (!/^[a-z][a-z0-9_]{0,39}$/.test(k) || ['name', 'identity_name', 'unsubscribe_url'].includes(k)) return bad;
    if (patch && v === null) continue;
    if (typeof v !== 'string' || (/^[\x20-\x7e]*$/.test(v) && v.length > 256)) return bad;
  }
  return null;
};
SPEC_BODY_RULES['/comm-api/api/lists/{listId}/contacts'] = (b) => firstOf(textRule(b, 'name', { max: 200, noControls: true }), fieldsRule(b, false));
SPEC_BODY_RULES['/comm-api/api/lists/{listId}/contacts/{contactId}'] = (b) => firstOf(
  'email' in b ? { why: 'a contact\'s email cannot change', codes: ['validation_error'] } : null, textRule(b, 'name', { max: 200, oneLine: true }), fieldsRule(b, true));
// PATCH of a list: "the fields given ... name ... null (PATCH), empty, ... over 100 ...; PATCH with neither field".
SPEC_BODY_RULES['/comm-api/api/lists/{listId}'] = (b) => firstOf(
  !('name' in b) && !('description' in b) ? { why: 'list PATCH with neither name nor description', codes: ['validation_error'] } : null,
  'name' in b && b.name === null ? { why: 'list name null', codes: ['validation_error'] } : null,
  'name' in b ? textRule(b, 'name', { required: true, max: 100, noControls: true }) : null, textRule(b, 'description', { max: 500 }));
// Batches: "missing, not an array, empty or over 1,000 items".
const batchRule = (field: string) => (b: Record<string, unknown>): Refusal | null => {
  const items = b[field];
  return Array.isArray(items) && items.length >= 1 && items.length <= 1000 ? null : { why: `${field} is not 1 to 1,000 items`, codes: ['validation_error'] };
};
SPEC_BODY_RULES['/comm-api/api/suppressions/batch'] = batchRule('suppressions');
SPEC_BODY_RULES['/comm-api/api/lists/{listId}/contacts/batch'] = batchRule('contacts');
SPEC_BODY_RULES['/api/public/v1/account/motor-blocks/{id}/name'] = (b) => textRule(b, 'name', { required: true, max: 100 });
SPEC_BODY_RULES['/api/public/v1/account/motor-blocks'] = (b) => firstOf(textRule(b, 'name', { required: true, max: 100 }), textRule(b, 'description', { max: 500 }));
// Webhooks (docs/ERRORS.md "Webhooks"): url over 2,048 characters, not http(s), with credentials or a fragment; events not a non-empty array.
const webhookRule = (create: boolean) => (b: Record<string, unknown>): Refusal | null => {
  const url = b.url;
  const codes = ['invalid_webhook_url', 'invalid_webhook_events', 'validation_error'];
  if (url === undefined) return create ? { why: 'webhook url missing', codes } : null;
  if (typeof url !== 'string' || url.length > 2048 || !/^https?:\/\//i.test(url) || /#/.test(url) || /^https?:\/\/[^/]*@/i.test(url)) return { why: `webhook url ${JSON.stringify(String(url).slice(0, 60))}`, codes };
  if ('events' in b && (!Array.isArray(b.events) || b.events.length === 0)) return { why: 'webhook events not a non-empty array', codes };
  return null;
};
SPEC_BODY_RULES['/api/public/v1/motor-blocks/{id}/webhooks'] = webhookRule(true);
SPEC_BODY_RULES['/api/public/v1/motor-blocks/{id}/webhooks/{webhookId}'] = webhookRule(false);
SPEC_BODY_RULES['/api/public/token'] = mintRule;
SPEC_BODY_RULES['/api/public/token/account-key'] = mintRule;

/** A declared header the route refuses as given (undefined: not sent). */
function mustRefuseHeader(op: Operation, k: Knowledge, name: string, value: string | undefined): Refusal | null {
  const given = value?.trim();
  if (name.toLowerCase() === 'x-tenant-id' && given?.toLowerCase() !== k.accountId) return { why: `X-Tenant-Id ${JSON.stringify(given)} is not the account` };
  if (name.toLowerCase() === 'idempotency-key' && op.path === '/api/public/v1/account/motor-blocks'
    && !/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.test(given ?? '')) return { why: `Idempotency-Key ${JSON.stringify(given)} is not a UUID v4` };
  if (name.toLowerCase() === 'idempotency-key' && op.path === '/v1/send' && given !== undefined && !(given.length > 0 && given.length <= 255 && !/[^\x21-\x7e]/.test(given))) {
    return { why: `Idempotency-Key ${JSON.stringify(given)} is not 1 to 255 printable characters` };
  }
  return null;
}

/** Why the documentation says `plan` must be refused, or null when it may be accepted. */
export function mustRefuse(op: Operation, plan: RequestPlan, valid: Knowledge): Refusal | null {
  // The HTTP layer, before any route, in its order (read-api/app.ts): media type and charset,
  // JSON syntax, an encoded U+0000 in the query, then text nothing can store.
  const { text, bytes, contentType, contentEncoding, chunked } = encodeBody(plan.body);
  const type = contentType ?? '';
  let body: unknown;
  if (bytes !== undefined && (bytes.length > 0 || chunked)) {
    const formOk = FORM_ROUTES.has(op.path) && mediaType(type) === 'application/x-www-form-urlencoded';
    if (!isJsonType(type) && !formOk && !ANY_BODY_ROUTES.has(op.path)) return { why: `a body of type ${JSON.stringify(type)}`, codes: ['unsupported_media_type'] };
    if (isJsonType(type)) {
      const charset = charsetOf(type);
      if (charset !== null && charset !== 'utf-8' && charset !== 'utf8') {
        // The unsubscribe page reads any body: JSON in another charset is decoded in it, and what that gives is not for this test to say.
        if (ANY_BODY_ROUTES.has(op.path)) return null;
        return { why: `a JSON body in ${charset}`, codes: ['unsupported_encoding'] };
      }
      if (contentEncoding !== undefined && !['gzip', 'deflate', 'br', 'identity'].includes(contentEncoding)) return { why: `Content-Encoding ${contentEncoding}`, codes: ['unsupported_encoding'] };
      const limit = ['/api/auth', '/api/account', '/api/motor-blocks', '/api/email'].some((prefix) => op.path.startsWith(`${prefix}/`) || op.path === prefix) ? 64 << 10 : 12 << 20;
      if (Buffer.byteLength(text ?? '') > limit) return { why: `a body of ${Buffer.byteLength(text ?? '')} bytes (the route takes ${limit})`, codes: ['payload_too_large'] };
      // An empty chunked body is no body.
      if (text === '') return null;
      // A leading byte order mark may be ignored (RFC 8259 §8.1), and is.
      try { body = JSON.parse((text ?? '').replace(/^\ufeff/, '')); } catch { return { why: 'a body that is not JSON', codes: ['invalid_json'] }; }
      if (typeof body !== 'object' || body === null) return { why: 'a JSON body that is neither an object nor an array', codes: ['invalid_json'] };
    }
  }
  if (plan.query.some(([k, v]) => /%00/i.test(k) || /%00/i.test(v))) return { why: 'the query string holds %00', codes: ['invalid_query'] };
  if (body !== undefined) {
    const st = storability(body);
    if (st.depth > 32) return { why: `JSON nested ${st.depth} levels deep`, codes: ['invalid_json'] };
    if (st.badString) return { why: 'a string with U+0000 or an unpaired surrogate', codes: ['invalid_json'] };
  }
  // Path ids: anything but the id itself (in any case) names nothing.
  for (const [name, sent] of Object.entries(plan.path)) {
    if (name === 'token') continue;
    const decoded = safeDecode(sent);
    if (decoded === null || !valid.pathValues(op, name).some((v) => v.toLowerCase() === decoded.toLowerCase())) return { why: `path ${name} ${JSON.stringify(sent.slice(0, 60))} is not the id` };
  }
  // Declared query parameters, as Express parses the query string (querystring: lenient about
  // broken percent-encoding, '+' a space): repeated, or not of their type.
  const query = parseQuery(plan.query.map(([k, v]) => `${k}=${v}`).join('&'));
  for (const p of op.params.filter((x) => x.in === 'query')) {
    const given = query[p.name];
    if (Array.isArray(given)) return { why: `query ${p.name} given ${given.length} times` };
    if (given === undefined) continue;
    const v = given;
    const s = p.schema ?? {};
    if (Array.isArray(s.enum) && !s.enum.map(String).includes(v)) return { why: `query ${p.name}=${JSON.stringify(v)} is not one of ${s.enum.join(', ')}` };
    if (s.type === 'boolean' && !['true', 'false'].includes(v.toLowerCase())) return { why: `query ${p.name}=${JSON.stringify(v)} is not a boolean` };
    if (s.type === 'number' || s.type === 'integer') {
      // Every number the API takes in a query is a whole count from 1 (limit, days, hours; SPEC "Endpoints").
      const n = Number(v);
      if (!DECIMAL_RE.test(v) || n < 1) return { why: `query ${p.name}=${JSON.stringify(v)} is not a whole number from 1 in decimal digits` };
      const max = QUERY_MAXIMA[`${op.path} ${p.name}`];
      if (max !== undefined && n > max) return { why: `query ${p.name}=${v} is over ${max}` };
    }
    // Ids the communications routes take in a query (docs/ERRORS.md "Communications tracking").
    if ((p.name === 'campaign_id' || p.name === 'message_id') && !UUID_RE.test(v)) return { why: `query ${p.name}=${JSON.stringify(v)} is not a uuid` };
  }
  // Headers the routes require.
  for (const p of op.params.filter((x) => x.in === 'header')) {
    const r = mustRefuseHeader(op, valid, p.name, plan.headers[p.name]);
    if (r) return r;
  }
  // The event stream's resume id (docs/EVENTS.md "Resuming": a malformed id is 400
  // invalid_last_event_id): the header, else ?lastEventId=, as the route reads them. A position
  // of the PostgreSQL store is `<xid8>:<bigint>`: digits beyond those columns name no event.
  if (op.params.some((p) => p.name === 'Last-Event-ID')) {
    const header = plan.headers['Last-Event-ID'];
    const q = query.lastEventId;
    // An empty header counts as absent (docs/EVENTS.md "Resuming").
    const id = header?.trim() || (typeof q === 'string' ? q.trim() : '') || undefined;
    if (id !== undefined && !isStreamEventId(id)) return { why: `Last-Event-ID ${JSON.stringify(id.slice(0, 60))} is not an event id` };
  }
  // The body against the published schema.
  if (op.bodySchema && !FORM_ROUTES.has(op.path) && !ANY_BODY_ROUTES.has(op.path)) {
    if (plan.body.kind === 'json') {
      const value = parsedBack(plan.body.value);
      const v = schemaViolation(op.bodySchema, value, 'body');
      // Past the HTTP layer the route (tsoa, then the handler) decides first on the headers and
      // ids; a spec rule's code is pinned only when those are as the route accepts them.
      const rest = plan.query.length === 0 && Object.entries(plan.path).every(([n, x]) => valid.pathValues(op, n).map(encodeURIComponent).includes(x))
        && op.params.filter((p) => p.in === 'header').every((p) => mustRefuseHeader(op, valid, p.name, plan.headers[p.name]) === null);
      const rule = SPEC_BODY_RULES[op.path];
      const specified = rule && typeof value === 'object' && value !== null && !Array.isArray(value) ? rule(value as Record<string, unknown>) : null;
      if (specified) return rest || !specified.codes ? specified : { why: specified.why };
      if (v) return { why: v };
    } else if (plan.body.kind === 'encoded' && body !== undefined) {
      const v = schemaViolation(op.bodySchema, body, 'body');
      if (v) return { why: v };
    } else if (text === undefined || text === '') {
      if ((op.bodySchema.required ?? []).length > 0) return { why: `no body, and it requires ${op.bodySchema.required.join(', ')}` };
    }
  }
  return null;
}


/**
 * What is wrong with a 4xx answer's body: Motor's envelope with a documented code named with this
 * status; RFC 6749's body on the OAuth token and revocation endpoints, RFC 6750's on the token
 * check; HTML allowed on the pages for browsers. Then, when the HTTP layer had to refuse the
 * request (`refusal.codes`), whether it did so with its own code.
 */
export function errorAnswerProblems(op: Operation, status: number, type: string, text: string, refusal: Refusal | null): string[] {
  const problems: string[] = [];
  let body: Json = null;
  try { body = JSON.parse(text); } catch { /* judged below */ }
  const json = type.startsWith('application/json');
  if (OAUTH_ERROR_PATHS.has(op.path) && json && body?.code === undefined) {
    if (!OAUTH_CODES.has(body?.error) || typeof body?.error_description !== 'string') problems.push(`${status}: not an RFC 6749 error body: ${text.slice(0, 200)}`);
  } else if (BEARER_ERROR_PATHS.has(op.path) && json && body?.code === undefined) {
    if (!BEARER_CODES.has(body?.error)) problems.push(`${status}: not an RFC 6750 error body: ${text.slice(0, 200)}`);
  } else if (!HTML_PAGES.has(op.path) || json) {
    if (!json || body?.success !== false || typeof body.error !== 'string' || typeof body.message !== 'string' || typeof body.code !== 'string') {
      problems.push(`${status} without the error envelope (${type}): ${text.slice(0, 200)}`);
    } else if (!DOCUMENTED.has(body.code)) {
      problems.push(`${status} ${body.code}: a code docs/ERRORS.md does not name (${body.message})`);
    } else if (!DOCUMENTED.get(body.code)!.has(status)) {
      problems.push(`${status} ${body.code}: docs/ERRORS.md names this code with ${[...DOCUMENTED.get(body.code)!].join(' or ')} (${body.message})`);
    }
  }
  // Refusals of the HTTP layer come before anything a route says (a body too large, a rate limit aside).
  const code = body?.code ?? body?.error;
  const layerCodes = refusal?.codes && OAUTH_BODY_PATHS.has(op.path) && body?.code === undefined ? ['invalid_request'] : refusal?.codes;
  if (layerCodes && ![...layerCodes, 'payload_too_large', 'headers_too_large', 'rate_limited'].includes(code)) {
    problems.push(`${status} ${code} for ${refusal!.why}; expected ${layerCodes.join(' or ')}`);
  }
  return problems;
}
