import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';

/**
 * Generators of HTTP requests for one OpenAPI operation: a plausible request (the values a
 * `Knowledge` says pass: real ids, a valid body) of which some parts are made hostile. What is
 * generated is plain data (`RequestPlan`), so that fast-check prints and shrinks a failing request
 * as what was sent; absurd sizes print as `"x".repeat(n)` (`Repeat`, `Nest`).
 */

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Param { name: string; in: string; required?: boolean; schema?: Json }
export interface Operation { method: string; path: string; scheme: string | null; scopes: string[]; params: Param[]; bodySchema: Json | null }

export type BodyPlan =
  | { kind: 'none' }
  | { kind: 'json'; value: unknown; contentType: string }
  | { kind: 'text'; text: string; contentType: string | null }
  /** JSON sent compressed (Content-Encoding), or its bytes framed as chunks (no Content-Length). */
  | { kind: 'encoded'; value: unknown; encoding: 'gzip' | 'deflate' | 'identity' | 'br' | 'gzip, gzip' | 'chunked' };

/** A JSON body that inflates to `bytes` (a few KiB sent): a compression bomb, printed short. */
export class Bomb {
  constructor(readonly bytes: number) {}
  [fc.toStringMethod](): string { return `Bomb(${this.bytes})`; }
}

export interface RequestPlan {
  /** Path parameter → the segment as sent (percent-encoded, or deliberately not). */
  path: Record<string, string>;
  /** The query string's pairs as sent (encoded, or deliberately not). */
  query: Array<[string, string]>;
  headers: Record<string, string>;
  body: BodyPlan;
}

/** What passes, per operation: the requests are built from it and then made hostile. */
export interface Knowledge {
  /** The caller's account (its id is the X-Tenant-Id the communications routes take). */
  accountId: string;
  /** The ids a path parameter may name (the fixture's first, then those the run created). */
  pathValues(op: Operation, name: string): string[];
  /** A value the route accepts, or undefined to leave the parameter out. */
  queryValue(op: Operation, param: Param): string | undefined;
  headerValue(op: Operation, name: string): fc.Arbitrary<string> | undefined;
  /** Query parameters a route reads that the document does not declare (an OAuth authorization request's), with values it accepts. */
  impliedQuery(op: Operation): Record<string, string>;
  body(op: Operation): Record<string, unknown> | undefined;
}

/** A long run of one string, printed short. */
export class Repeat {
  constructor(readonly unit: string, readonly times: number) {}
  toJSON(): string { return this.unit.repeat(this.times); }
  toString(): string { return this.toJSON(); }
  [fc.toStringMethod](): string { return `${JSON.stringify(this.unit)}.repeat(${this.times})`; }
}

/** `depth` nested arrays or objects around `inner`, printed short (and written by `jsonText`, deeper than JSON.stringify's stack allows). */
export class Nest {
  constructor(readonly kind: 'array' | 'object', readonly depth: number, readonly inner: unknown = 1) {}
  [fc.toStringMethod](): string { return `Nest(${this.kind}, ${this.depth}, ${fc.stringify(this.inner)})`; }
}

/** JSON text of a generated value (own `__proto__` keys included, as JSON.stringify writes them); undefined for undefined. */
export function jsonText(v: unknown): string | undefined {
  if (v instanceof Nest) {
    const inner = jsonText(v.inner) ?? 'null';
    return v.kind === 'array' ? `${'['.repeat(v.depth)}${inner}${']'.repeat(v.depth)}` : `${'{"a":'.repeat(v.depth)}${inner}${'}'.repeat(v.depth)}`;
  }
  if (v instanceof Repeat) return JSON.stringify(v.toJSON());
  if (Array.isArray(v)) return `[${v.map((x) => jsonText(x) ?? 'null').join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    return `{${Object.keys(v).flatMap((k) => {
      const t = jsonText((v as Record<string, unknown>)[k]);
      return t === undefined ? [] : [`${JSON.stringify(k)}:${t}`];
    }).join(',')}}`;
  }
  return JSON.stringify(v);
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
export const hasBody = (op: Operation): boolean => WRITE_METHODS.has(op.method);

// ---------- values ----------

/** Characters that break naive text handling: NUL, controls, lone surrogates, bidi, BOM, line separators, combining marks, astral. */
const NASTY_CHARS = ['\u0000', '\u0001', '\u0008', '\u001b', '\u007f', '\u0085', '\u00a0', '\u200b', '\u200e', '\u202e', '\u2028', '\u2029',
  '\ufeff', '\ufffd', '\uffff', '\ud800', '\udfff', '\u0301', '\r', '\n', '\r\n', '\t', '"', '\\', '<', '>', '&', "'", '%', '{{', '}}', '`', '$', '@', '/', '..',
  '😀', '\u{10ffff}', 'ß', 'İ', 'ﬁ', 'Ⅻ', '٣', '🇺🇳'];

const nastyString = fc.array(fc.oneof(fc.constantFrom(...NASTY_CHARS), fc.string({ unit: 'grapheme', maxLength: 4 }), fc.string({ unit: 'binary', maxLength: 3 })), { minLength: 1, maxLength: 8 })
  .map((parts) => parts.join(''));

const numericStrings = fc.constantFrom('NaN', '-NaN', 'Infinity', '-Infinity', '-0', '0', '-1', '1.5', '1e999', '-1e999', '1e-999', '0x10', '0b1', '0o7',
  '1_000', '1,5', ' 42 ', '+1', '.5', '5.', '9007199254740993', '18446744073709551616', '١٢', '', ' ', '1e1', '1E2', '10.0', '+10', '010');

const numbers = fc.oneof(
  fc.constantFrom(0, -0, -1, 1, 0.5, -0.5, 59, 60, 61, 899, 900, 901, 24, 168, 169, 200, 201, 500, 501, 1000, 1001, 65535, 65536,
    2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53 - 1, 2 ** 53 + 2, 2 ** 64, 1e21, 1e308, -1e308, Number.MIN_VALUE, 5e-324),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** Strings that look like dates but are not what a database takes. */
const dateStrings = fc.constantFrom('0000-01-01T00:00:00Z', '-000001-01-01T00:00:00Z', '+275760-09-13T00:00:00Z', '+275760-09-13T00:00:00.001Z',
  '9999-12-31T23:59:59.999Z', '2026-02-30T00:00:00Z', '2026-11-24T25:00:00Z', '2026-11-24T24:00:00Z', '1970-01-01', '2026-11-24T00:00:00+99:00',
  '2026-11-24T00:00:00+23:59', '1e12', 'now', 'today', 'Tue Nov 24 2026 10:00:00 GMT+0100', '2026-11-24 10:00:00.1234567', '2026-W48', '2026-330',
  '20261124T100000Z', '2026-11-24T10:00:00Z\u0000', '0', '-1', '8640000000000001', new Date(Date.now() + 365 * 864e5).toISOString(),
  new Date(Date.now() - 3650 * 864e5).toISOString());

const emailish = fc.oneof(
  fc.constantFrom('a@b', '@', 'a@', '@rcpt.test', 'a@@rcpt.test', 'a..b@rcpt.test', '.a@rcpt.test', 'a@rcpt..test', 'a@-rcpt.test', 'ü@rcpt.test',
    'user@xn--rcpt.test', '"a b"@rcpt.test', 'a@[127.0.0.1]', 'a@localhost', 'user@rcpt.test\u0000', ' user@rcpt.test ', 'USER@RCPT.TEST',
    'user@rcpt.test\r\nBcc: x@y.z', 'user+tag@rcpt.test', 'a,b@rcpt.test', 'user@rcpt.test,other@rcpt.test', 'user@rcpt.test;other@rcpt.test', 'postmaster'),
  fc.integer({ min: 60, max: 400 }).map((n) => `${'a'.repeat(n)}@rcpt.test`),
  fc.integer({ min: 250, max: 300 }).map((n) => `u@${'d'.repeat(n)}.test`),
);

const uuidish = fc.oneof(fc.uuid(), fc.uuid().map((u) => u.toUpperCase()), fc.uuid().map((u) => `{${u}}`), fc.uuid().map((u) => u.replace(/-/g, '')),
  fc.constantFrom('00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '00000000-0000-0000-0000-00000000000g'));

const huge = fc.oneof(
  fc.constantFrom(1_000, 10_000, 100_000).map((n) => new Repeat('x', n)),
  fc.constantFrom(1_000, 70_000).map((n) => new Repeat('é', n)),
  fc.constantFrom(1 << 20).map((n) => new Repeat('y', n)),
);

const deep = fc.oneof(
  fc.integer({ min: 30, max: 34 }).map((d) => new Nest('array', d)),
  fc.integer({ min: 30, max: 34 }).map((d) => new Nest('object', d)),
  fc.constantFrom(1_000, 5_000).map((d) => new Nest('array', d)),
);

const junkObjects = fc.oneof(
  fc.constantFrom({}, [], [null], { $ne: null }, { $gt: '' }, { toString: 1 }, { valueOf: 'x' }, [{}], [[]], { length: 1e9 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 4 }),
  fc.constantFrom(1_000, 10_000).map((n) => Array.from({ length: n }, () => 'a')),
  fc.constantFrom(2_000).map((n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]))),
);

/**
 * Objects JSON can make that String(), Number(), `${}` and `==` cannot convert (a `toString` and
 * `valueOf` that are no functions), and ones whose conversion lies.
 */
const unprintable = fc.constantFrom<unknown>(
  { toString: 1 }, { toString: 1, valueOf: 1 }, { toString: {}, valueOf: {} }, [{ toString: 1 }], { toJSON: 1 }, { toISOString: 1 }, { then: 1 },
  { length: 2, 0: 'a', 1: 'b' }, ['txt'], ['a', 'b'], [1], [true], [null],
);

/** A value for a body field or a whole body: the wrong type, out of bounds, malformed or absurd. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: unprintable, weight: 3 },
  { arbitrary: fc.constantFrom(null, true, false), weight: 2 },
  { arbitrary: numbers, weight: 3 },
  { arbitrary: numericStrings, weight: 2 },
  { arbitrary: nastyString, weight: 4 },
  { arbitrary: fc.string({ maxLength: 30 }), weight: 2 },
  { arbitrary: huge, weight: 1 },
  { arbitrary: deep, weight: 1 },
  { arbitrary: junkObjects, weight: 2 },
  { arbitrary: fc.jsonValue({ maxDepth: 2 }), weight: 2 },
  { arbitrary: dateStrings, weight: 1 },
  { arbitrary: emailish, weight: 2 },
  { arbitrary: uuidish, weight: 1 },
);

/** URLs a parser takes in odd ways: userinfo, ports, IP forms, IDN, fragments, other schemes, absurd lengths. */
const urlish = fc.oneof(
  fc.constantFrom('https://hooks.example.test/x#frag', 'https://user:pass@hooks.example.test/', 'http://127.0.0.1/', 'http://[::1]:80/', 'http://0x7f.1/',
    'http://2130706433/', 'http://localhost./', 'https://xn--nxasmq6b.example/', 'https://bücher.example/', 'https://hooks.example.test:0/', 'https://hooks.example.test:65536/',
    'https://hooks.example.test:99999999999/', 'ftp://hooks.example.test/', 'javascript:alert(1)', 'data:text/plain,x', 'file:///etc/passwd', 'https://', 'https:///x',
    '//hooks.example.test/x', '/relative', 'https://a..b/', 'https://-a.example/', 'https://a_b.example/', 'https://[::ffff:127.0.0.1]/', 'https://[fe80::1%25eth0]/',
    'https://hooks.example.test/\u0000', 'https://hooks.example.test/%ZZ', 'https://hooks.example.test/ a', 'HTTPS://HOOKS.EXAMPLE.TEST/', 'https://hooks.example.test/?a=\ud800',
    'http://app.example.test/cb', 'http://localhost:1/cb', 'https://app.example.test/cb#x', 'myapp://cb'),
  fc.constantFrom(2_040, 2_049, 10_000).map((n) => `https://hooks.example.test/${'p'.repeat(n)}`),
  fc.webUrl({ withFragments: true, withQueryParameters: true }),
);

/** Host names and near misses: IDN, trailing dots, long labels, IP literals, underscores, the service's own. */
const hostnameish = fc.oneof(
  fc.constantFrom('example.com', 'EXAMPLE.COM', 'example.com.', '.example.com', 'example..com', 'localhost', 'com', '127.0.0.1', '[::1]', '::1', '1.2.3.4.5',
    '_dmarc.example.com', 'a_b.example.com', '-a.example.com', 'a-.example.com', 'xn--.example.com', 'xn--zz-zzz.com', 'bücher.example', 'ÄÖÜ.example',
    'example.com/path', 'example.com:25', 'user@example.com', 'example.com\u0000', '*.example.com', 'sandbox.motor.test', 'x.sandbox.motor.test', 'motor.test',
    'a.b.c.d.e.f.g.h.i.j.k.example.com', '𝐞𝐱𝐚𝐦𝐩𝐥𝐞.com', 'example.com\n', '٣.com'),
  fc.constantFrom(63, 64, 250).map((n) => `${'a'.repeat(n)}.example.com`),
  fc.domain(),
);

const dnsLabelish = fc.oneof(fc.constantFrom('', 'a', '-a', 'a-', 'a--b', 'A', 'ab_c', 'xn--a', 'ü', '0', 'a.b', 'fuzzbox', 'FUZZBOX'), fc.constantFrom(63, 64, 300).map((n) => 'h'.repeat(n)), fc.string({ maxLength: 12 }));

const htmlish = fc.oneof(
  fc.constantFrom('<p>', '</p>', '<script>alert(1)</script>', '<a href="javascript:x">x</a>', '<img src=x onerror=alert(1)>', '<!--', '<![CDATA[', '<?xml?>',
    '{{', '}}', '{{{name}}}', '{{#each x}}', '{{unsubscribe_url}}', '{{ name | upper }}', '{{__proto__}}', '{{constructor.constructor}}', '<a href="{{unsubscribe_url}}">u</a>'),
  fc.constantFrom(1_000, 20_000).map((n) => new Repeat('<div>', n)),
  fc.constantFrom(2_000).map((n) => new Repeat('<a href="https://x.example/">x</a>', n)),
);

const dictionary = fc.oneof(
  fc.dictionary(fc.oneof(fc.string({ maxLength: 12 }), extraKeyArb()), fc.oneof(fc.string({ maxLength: 20 }), nastyString, numbers, fc.boolean(), fc.constant(null)), { maxKeys: 6 }),
  fc.constantFrom(21, 100, 1_000).map((n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, `v${i}`]))),
  fc.constantFrom({ 'X-Tag': 'a\r\nBcc: x@y.z' }, { 'x-tag': 'a', 'X-TAG': 'b' }, { 'X-Ünicode': 'v' }, { 'X-Long': 'v'.repeat(10_000) }, { '': 'v' }, { 'X-A:B': 'v' },
    { 'X-A;B': 'v' }, { Subject: 'x' }, { 'Content-Type': 'text/html' }, { 'X-Service-Id': 'x' }, { plan: 'x'.repeat(257) }, { name: 'reserved' }, { unsubscribe_url: 'x' }),
);

/** Text at and around the documented lengths (78, 100, 200, 256, 500, 2,048), padded with spaces that trimming removes, or not. */
const boundaryText = fc.tuple(fc.constantFrom(0, 1, 77, 78, 79, 99, 100, 101, 199, 200, 201, 255, 256, 257, 499, 500, 501), fc.constantFrom('', '  '))
  .map(([n, pad]) => `${pad}${'a'.repeat(n)}${pad}`);

/** A value of the type a field of this name takes, with hostile content. */
export function valueForKey(key: string): fc.Arbitrary<unknown> | null {
  if (/^(name|description|note|from_name|fromName|subject)$/.test(key)) return fc.oneof(boundaryText, nastyString, fc.constantFrom('a\r\nb', 'a\u0085b', 'a\u2028b', '\u200b', ' '));
  if (/^(to|emails|addresses|suppressions|contacts)$/.test(key)) {
    const item: fc.Arbitrary<unknown> = key === 'suppressions' || key === 'contacts' ? fc.record({ email: emailish, name: fc.oneof(nastyString, fc.string()), note: nastyString }, { requiredKeys: [] }) : emailish;
    return fc.oneof(fc.array(item, { maxLength: 4 }), fc.constantFrom(26, 1_001).map((n) => Array.from({ length: n }, (_, i) => (key === 'suppressions' || key === 'contacts' ? { email: `u${i}@rcpt.test` } : `u${i}@rcpt.test`))), emailish);
  }
  if (/email|^from$|username/i.test(key)) return emailish;
  if (/url|uri|redirect|resource|client_id/i.test(key)) return fc.oneof(urlish, fc.array(urlish, { maxLength: 12 }), fc.constantFrom(2_030, 2_048, 2_049).map((n) => `https://hooks.example.test/${'p'.repeat(n - 27)}`));
  if (/^domain$/.test(key)) return hostnameish;
  if (/^(host)$/.test(key)) return fc.oneof(hostnameish, fc.constant('localhost'));
  if (/handle/.test(key)) return dnsLabelish;
  if (/(^id|Id|_id)$/.test(key)) return uuidish;
  if (/(_at|^from|^to)$/.test(key)) return dateStrings;
  if (/^(scopes|events)$/.test(key)) return fc.array(fc.oneof(fc.constantFrom('logs.read', 'logs.pii', 'config.manage', 'email.send', 'message.delivered', 'message.bounced', '*', ''), nastyString), { maxLength: 5 });
  if (/html|body_text|^text$|subject|^query$/.test(key)) return htmlish;
  if (/^(headers|metadata|fields|sampleData)$/.test(key)) return dictionary;
  if (/^(port|ttlSeconds|limit|days|hours)$/.test(key)) return numbers;
  return null;
}

// ---------- bodies ----------

/** A property name that is not in the schema, hostile ones included. */
function extraKeyArb(): fc.Arbitrary<string> {
  return fc.oneof(fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '', ' ', 'a\u0000b', '\ud800', '$where', 'extra', 'id', 'accountId', 'motorBlockId', 'dryRun', 'x'.repeat(1000)),
    fc.string({ maxLength: 10 }));
}
const extraKey = extraKeyArb();

type Mutation =
  | { kind: 'delete'; key: string }
  | { kind: 'set'; key: string; value: unknown }
  | { kind: 'replace'; value: unknown };

const defineOwn = (o: Record<string, unknown>, key: string, value: unknown) => {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
};

function applyMutations(base: Record<string, unknown>, muts: Mutation[]): unknown {
  let v: unknown = { ...base };
  for (const m of muts) {
    if (m.kind === 'replace') { v = m.value; continue; }
    if (typeof v !== 'object' || v === null || Array.isArray(v) || v instanceof Nest) v = {};
    const o = { ...(v as Record<string, unknown>) };
    if (m.kind === 'delete') delete o[m.key];
    else defineOwn(o, m.key, m.value);
    v = o;
  }
  return v;
}

function bodyValue(op: Operation, k: Knowledge): fc.Arbitrary<unknown> {
  const base = k.body(op) ?? {};
  return mutatedObject(base, Object.keys(op.bodySchema?.properties ?? {}));
}

/**
 * `base` with up to three mutations: a field (of `base` or `declared`) left out or set to a value
 * of its kind with hostile content or to any hostile value, an undeclared field added (`__proto__`
 * and the like), or the whole replaced (null, an array, a scalar, deep nesting).
 */
export function mutatedObject(base: Record<string, unknown>, declared: readonly string[]): fc.Arbitrary<unknown> {
  const keys = [...new Set([...Object.keys(base), ...declared])];
  const mutation: fc.Arbitrary<Mutation> = fc.oneof(
    ...(keys.length ? [
      { arbitrary: fc.constantFrom(...keys).map((key): Mutation => ({ kind: 'delete', key })), weight: 2 },
      { arbitrary: fc.constantFrom(...keys).chain((key) => { const own = valueForKey(key); return (own ? fc.oneof(own, hostileValue) : hostileValue).map((value): Mutation => ({ kind: 'set', key, value })); }), weight: 6 },
    ] : []),
    { arbitrary: fc.tuple(extraKey, hostileValue).map(([key, value]): Mutation => ({ kind: 'set', key, value })), weight: 2 },
    { arbitrary: fc.oneof(fc.constantFrom(null, [], [base], 'text', 12, true, {}), deep, fc.jsonValue({ maxDepth: 2 })).map((value): Mutation => ({ kind: 'replace', value })), weight: 1 },
  );
  return fc.array(mutation, { minLength: 0, maxLength: 3 }).map((muts) => applyMutations(base, muts));
}

const JSON_TYPES = ['application/json', 'application/json; charset=utf-8', 'application/JSON', 'application/merge-patch+json'];
const OTHER_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=utf-16',
  'application/json; charset=latin1', 'application/xml', 'application/json, text/plain', 'json', ''];

/** A value's top-level fields as application/x-www-form-urlencoded (a non-string as its JSON text). */
function formText(v: unknown): string {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || v instanceof Nest) return jsonText(v) ?? '';
  return Object.keys(v).map((key) => {
    const x = (v as Record<string, unknown>)[key];
    const text = typeof x === 'string' ? x : x instanceof Repeat ? x.toJSON() : jsonText(x) ?? '';
    return `${encode(key)}=${encode(text)}`;
  }).join('&');
}

function bodyPlan(op: Operation, k: Knowledge): fc.Arbitrary<BodyPlan> {
  if (!hasBody(op)) return fc.constant({ kind: 'none' });
  const value = bodyValue(op, k);
  return fc.oneof(
    { arbitrary: fc.tuple(value, fc.constantFrom(...JSON_TYPES)).map(([v, contentType]): BodyPlan => ({ kind: 'json', value: v, contentType })), weight: 12 },
    // The same body sent as text JSON does not parse as: cut short, with junk around it, duplicated keys, a BOM.
    { arbitrary: fc.tuple(value, fc.nat(), fc.constantFrom('cut', 'trailing', 'bom', 'single-quoted', 'duplicate')).map(([v, n, how]): BodyPlan => {
      const text = jsonText(v) ?? 'undefined';
      const mangled = how === 'cut' ? text.slice(0, n % Math.max(1, text.length))
        : how === 'trailing' ? `${text} {}` : how === 'bom' ? `\ufeff${text}` : how === 'single-quoted' ? text.replace(/"/g, "'") : text.replace(/^\{/, '{"a":1,"a":2,');
      return { kind: 'text', text: mangled, contentType: 'application/json' };
    }), weight: 2 },
    { arbitrary: fc.tuple(fc.oneof(fc.constantFrom('', ' ', 'null', '{', '}', '[', '{"a":}', 'NaN', 'undefined', '{"a":NaN}', '{"a":Infinity}', '{"a":1e999}', '{"a":-}', '\u0000', '{"\\ud800":1}', '{"a":"\\u0000"}', 'a=1&b=2'), fc.string({ maxLength: 40 })), fc.constantFrom(...JSON_TYPES))
      .map(([text, contentType]): BodyPlan => ({ kind: 'text', text, contentType })), weight: 2 },
    // The same fields as a form (what OAuth clients and browsers post; the routes that read forms take it).
    { arbitrary: value.map((v): BodyPlan => ({ kind: 'text', text: formText(v), contentType: 'application/x-www-form-urlencoded' })), weight: 1 },
    // A body in another media type, or with none.
    { arbitrary: fc.tuple(value, fc.constantFrom(...OTHER_TYPES, null)).map(([v, contentType]): BodyPlan => ({ kind: 'text', text: jsonText(v) ?? '', contentType })), weight: 2 },
    { arbitrary: fc.constant<BodyPlan>({ kind: 'none' }), weight: 1 },
    { arbitrary: fc.tuple(fc.oneof({ arbitrary: value, weight: 4 }, { arbitrary: fc.constantFrom(70_000, 13 << 20).map((n) => new Bomb(n)), weight: 1 }),
      fc.constantFrom('gzip', 'deflate', 'identity', 'br', 'gzip, gzip', 'chunked') as fc.Arbitrary<'gzip'>)
      .map(([v, encoding]): BodyPlan => ({ kind: 'encoded', value: v, encoding })), weight: 2 },
  );
}

// ---------- path, query, headers ----------

/** A path segment as sent: names nothing, is no id at all, or is not valid percent-encoding. */
function pathJunk(valid: string): fc.Arbitrary<string> {
  return fc.oneof(
    fc.uuid(),
    fc.constant(valid.toUpperCase()),
    fc.constantFrom(`${valid}x`, valid.slice(0, -1), `${valid}%20`, `%20${valid}`, `${valid}%00`, `${valid}.json`, `${valid};a=b`, `${valid}%2F..`, encodeURIComponent(`${valid}\n`)),
    fc.constantFrom('..', '.', '%2e%2e', '%2E', '..%2F..%2Fetc%2Fpasswd', '%2F', '%5C', '%E0%A4%A', '%zz', '%', '%00', '%C0%AE%C0%AE', '%FF%FE', '%ED%A0%80',
      '%u0041', '%25', '+', '%20', 'null', 'undefined', 'NaN', '0', '-1', '1e999', '__proto__', 'constructor', '%F0%9F%98%80', '*', '~', '%3Cscript%3E'),
    fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }).map(encode),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 8 }).map((s) => Buffer.from(s, 'utf8').toString('hex').replace(/(..)/g, '%$1')),
    fc.constantFrom(300, 3_000, 10_000).map((n) => 'x'.repeat(n)),
  );
}

/** Percent-encoding of any JS string: a lone surrogate (which encodeURIComponent refuses) as the bytes WTF-8 gives it, which are not UTF-8. */
function encode(s: string): string {
  // By code point: a lone surrogate is one on its own.
  return s.replace(/[^]/gu, (ch) => {
    const c = ch.charCodeAt(0);
    if (ch.length > 1 || c < 0xd800 || c > 0xdfff) return encodeURIComponent(ch);
    return [0xed, 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
  });
}

/** A query value as sent, of the wrong type, out of bounds, or malformed. */
const queryJunk: fc.Arbitrary<string> = fc.oneof(
  numericStrings.map(encode),
  dateStrings.map(encode),
  nastyString.map((s) => encode(s.replace(/\u0000/g, 'x'))),
  fc.constantFrom('true', 'false', 'null', '[]', '{}', '%7B%22%24ne%22%3A1%7D', 'a,b', ',', '*', '%', '%E0%A4%A', '%zz', '%FF', '+', '%2B', '=', '%26', '&', 'a=b'),
  fc.constantFrom(1_000, 5_000).map((n) => 'z'.repeat(n)),
  emailish.map(encode),
  uuidish.map(encode),
  // Cursors of the base64url JSON shape the routes return, with what they hold made hostile.
  fc.tuple(fc.oneof(dateStrings, fc.jsonValue({ maxDepth: 1 })), fc.oneof(fc.uuid(), fc.jsonValue({ maxDepth: 1 }))).map(([t, id]) => Buffer.from(JSON.stringify([t, id])).toString('base64url')),
  fc.jsonValue({ maxDepth: 2 }).map((v) => Buffer.from(jsonText(v) ?? '').toString('base64url')),
  fc.string({ maxLength: 30 }).map((s) => Buffer.from(s).toString('base64')),
);

/** The logs filter language (recipient:, domain:, status:, metadata.<key>:) with its quoting broken and its terms multiplied. */
const logsQueryish = fc.oneof(
  fc.constantFrom('recipient:', 'domain:', 'status:', 'metadata.:', 'metadata.a:', 'metadata.a.b:"c"', 'metadata.%_:x', 'recipient:"', 'status:nope', 'status:sent',
    'unknown:x', 'recipient:user@rcpt.test recipient:user@rcpt.test', 'metadata.a:"\\"', 'metadata.a:"x" OR 1=1 --', ':', '"', '""', '\\', 'domain:*', 'recipient:%'),
  fc.array(fc.oneof(fc.constantFrom('recipient:', 'domain:', 'status:', 'metadata.k:'), fc.string({ maxLength: 6 })), { maxLength: 6 }).map((ts) => ts.join(' ')),
  fc.constantFrom(50, 400).map((n) => Array.from({ length: n }, (_, i) => `metadata.k${i}:v`).join(' ')),
);
const statusListish = fc.array(fc.constantFrom('queued', 'processed', 'deferred', 'delivered', 'bounced', 'failed', 'complained', 'sent', '', ' ', 'DELIVERED', 'nope', '__proto__'), { maxLength: 5 }).map((xs) => xs.join(','));

/**
 * Event-stream ids (docs/EVENTS.md "Event ids": `<txId>:<position>` or `<position>/<messageId>/<index>`)
 * with numbers at and past what the store's columns hold (xid8: 2^64 - 1, bigint: 2^63 - 1).
 */
const bigDigits = fc.constantFrom('0', '1', '9223372036854775807', '9223372036854775808', '18446744073709551615', '18446744073709551616', '99999999999999999999', '00000000000000000001');
export const eventIdish: fc.Arbitrary<string> = fc.oneof(
  fc.tuple(bigDigits, bigDigits).map(([a, b]) => `${a}:${b}`),
  fc.tuple(bigDigits, bigDigits, fc.uuid(), fc.constantFrom('0', '1', '999999', '1000000', '-1', '01')).map(([a, b, u, i]) => `${a}:${b}/${u}/${i}`),
  fc.constantFrom(':', '1:', ':1', '1:1/', '1:1//', '1:1/x/0', ' 1:1', '1:1 ', '1:1\t', '1::1', '+1:1', '1:-1', '0x1:1', '1e3:1'),
);

/** Query values of the kind a parameter of this name takes, hostile in content. */
function queryValueForName(name: string): fc.Arbitrary<string> | null {
  if (name === 'lastEventId') return eventIdish.map(encode);
  if (name === 'query') return logsQueryish.map(encode);
  if (name === 'status' || name === 'currentOutcome') return statusListish.map(encode);
  if (name === 'smtpMessageId') return fc.oneof(emailish, fc.constantFrom('<>', '<', '>', '<<a@b>>', '<a@b', 'a@b>', '<a@b><c@d>')).map(encode);
  if (name === 'email') return emailish.map(encode);
  if (/^(client_id|redirect_uri|resource)$/.test(name)) return urlish.map(encode);
  if (name === 'scope') return fc.array(fc.constantFrom('email.send', 'read:analytics', 'logs.pii', 'manage:motor-blocks', '', 'openid', '*'), { maxLength: 4 }).map((xs) => encode(xs.join(' ')));
  if (name === 'response_type') return fc.constantFrom('code', 'token', 'CODE', 'code token', '').map(encode);
  if (name === 'code_challenge_method') return fc.constantFrom('S256', 's256', 'plain', 'S512', '').map(encode);
  if (name === 'code_challenge') return fc.oneof(fc.constantFrom(42, 43, 44, 128, 129).map((n) => 'a'.repeat(n)), fc.base64String({ maxLength: 60 })).map(encode);
  if (name === 'state') return fc.constantFrom(1024, 1025, 5000).map((n) => 's'.repeat(n));
  return null;
}

/** How much of a request is made hostile: nothing, everything, or one part (so that the rest gets the part judged past the checks before it). */
type Hostility = 'none' | 'all' | 'one';

function queryPlan(op: Operation, k: Knowledge, hostility: Hostility): fc.Arbitrary<Array<[string, string]>> {
  const implied = k.impliedQuery(op);
  const declared: Param[] = [...op.params.filter((p) => p.in === 'query'), ...Object.keys(implied).map((name) => ({ name, in: 'query', required: true }))];
  const validOf = (p: Param) => implied[p.name] ?? k.queryValue(op, p);
  const plausible = declared.map((p) => {
    const valid = validOf(p);
    const validEncoded = valid === undefined ? [] : [[p.name, encode(valid)] as [string, string]];
    return p.required ? fc.constant(validEncoded) : fc.constantFrom(validEncoded, []);
  });
  const hostile = declared.map((p) => {
    const valid = validOf(p);
    const own = queryValueForName(p.name);
    const junk = own ? fc.oneof(own, queryJunk) : queryJunk;
    return fc.oneof(
      { arbitrary: junk.map((v): Array<[string, string]> => [[p.name, v]]), weight: 5 },
      { arbitrary: fc.array(fc.oneof(junk, fc.constant(valid === undefined ? '' : encode(valid))), { minLength: 2, maxLength: 3 }).map((vs) => vs.map((v): [string, string] => [p.name, v])), weight: 1 },
      { arbitrary: fc.tuple(fc.constantFrom('[]', '[a]', '[0]', '%5B%5D', '.a', '[__proto__]'), queryJunk).map(([suffix, v]): Array<[string, string]> => [[`${p.name}${suffix}`, v]]), weight: 1 },
    );
  });
  // Parameters the document does not declare (some routes read them anyway: OAuth, confirmation links).
  const extra = fc.array(fc.tuple(fc.constantFrom('token', 'code', 'client_id', 'redirect_uri', 'response_type', 'scope', 'state', 'code_challenge',
    'code_challenge_method', 'resource', 'cursor', 'limit', 'motorBlockId', 'includePII', '__proto__', 'constructor', 'a[b][c]', '', 'x'), queryJunk), { minLength: 1, maxLength: 2 });
  const flat = (parts: Array<Array<[string, string]>>) => parts.flat();
  if (hostility === 'none') return fc.tuple(...plausible).map(flat);
  if (hostility === 'all') return fc.tuple(fc.tuple(...declared.map((_, i) => fc.oneof(plausible[i], hostile[i]))), fc.option(extra, { nil: [] })).map(([parts, more]) => [...flat(parts), ...more]);
  // One parameter made hostile (or, without any, an undeclared one added).
  if (declared.length === 0) return extra;
  return fc.nat(declared.length - 1).chain((target) => fc.tuple(...declared.map((_, i) => (i === target ? hostile[i] : plausible[i])))).map(flat);
}

/** A header value fetch will send (no CR, LF or NUL; Latin-1 at most), hostile otherwise. */
const headerJunk: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('', ' ', 'null', 'undefined', '0', '-1', 'a\tb', 'caf\u00e9', '\u00ff\u00fe', '{"$ne":1}', '*', ',', 'a, b', '../../etc/passwd'),
  fc.string({ unit: 'binary-ascii', maxLength: 40 }).map((s) => s.replace(/[\u0000-\u0008\u000a-\u001f\u007f]/g, '').trim()),
  uuidish,
  fc.constantFrom(200, 1_000, 8_000).map((n) => 'k'.repeat(n)),
);

function headerPlan(op: Operation, k: Knowledge, hostility: Hostility): fc.Arbitrary<Record<string, string>> {
  const declared = op.params.filter((p) => p.in === 'header');
  const parts = declared.map((p) => {
    const valid = k.headerValue(op, p.name);
    const junk = p.name.toLowerCase() === 'last-event-id' ? fc.oneof(eventIdish, headerJunk) : headerJunk;
    const plausible = valid ? valid.map((v) => ({ [p.name]: v })) : fc.constant({});
    if (hostility === 'none') return plausible;
    return fc.oneof(
      ...(hostility === 'all' ? [{ arbitrary: plausible, weight: 2 }] : []),
      { arbitrary: fc.constant({}), weight: 1 },
      { arbitrary: junk.map((v) => ({ [p.name]: v })), weight: 3 },
    );
  });
  return fc.tuple(...parts).map((hs) => Object.assign({}, ...hs) as Record<string, string>);
}

function pathPlan(op: Operation, k: Knowledge, hostility: Hostility): fc.Arbitrary<Record<string, string>> {
  const names = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
  const parts = names.map((name) => {
    const values = k.pathValues(op, name);
    const valid = fc.constantFrom(...values.map(encode));
    if (hostility === 'none') return valid.map((v) => ({ [name]: v }));
    const junk = pathJunk(values[0]);
    return (hostility === 'all' ? fc.oneof(valid, junk) : junk).map((v) => ({ [name]: v }));
  });
  return fc.tuple(...parts).map((ps) => Object.assign({}, ...ps) as Record<string, string>);
}

/**
 * A request for `op`: mostly one part made hostile (the body more often than the others, for the
 * routes that take one), the others as the route accepts them; sometimes every part at once.
 */
export function requestPlan(op: Operation, k: Knowledge): fc.Arbitrary<RequestPlan> {
  const plan = (path: Hostility, query: Hostility, headers: Hostility, body: Hostility) => fc.record({
    path: pathPlan(op, k, path), query: queryPlan(op, k, query), headers: headerPlan(op, k, headers),
    body: body === 'none' ? fc.constant(validBody(op, k)) : bodyPlan(op, k),
  });
  const has = { path: op.path.includes('{'), query: true, headers: op.params.some((p) => p.in === 'header'), body: hasBody(op) };
  return fc.oneof(
    { arbitrary: plan('all', 'all', 'all', 'all'), weight: 2 },
    ...(has.body ? [{ arbitrary: plan('none', 'none', 'none', 'one'), weight: 5 }] : []),
    ...(has.path ? [{ arbitrary: plan('one', 'none', 'none', 'none'), weight: 2 }] : []),
    { arbitrary: plan('none', 'one', 'none', 'none'), weight: 2 },
    ...(has.headers ? [{ arbitrary: plan('none', 'none', 'one', 'none'), weight: 2 }] : []),
  );
}

/** The body the route accepts (none for a method without one). */
function validBody(op: Operation, k: Knowledge): BodyPlan {
  if (!hasBody(op)) return { kind: 'none' };
  const base = k.body(op);
  return base === undefined ? { kind: 'none' } : { kind: 'json', value: base, contentType: 'application/json' };
}

/** The URL path and query a plan names (the path template filled in as generated, nothing re-encoded). */
export function urlOf(op: Operation, plan: RequestPlan): string {
  const path = op.path.replace(/\{(\w+)\}/g, (_, name: string) => plan.path[name]);
  const query = plan.query.map(([k, v]) => `${k}=${v}`).join('&');
  return query ? `${path}?${query}` : path;
}

export interface EncodedBody {
  /** The body's text before any Content-Encoding (what the service parses, if it inflates it). */
  text?: string;
  bytes?: Buffer;
  contentType?: string;
  contentEncoding?: string;
  /** No Content-Length: Transfer-Encoding: chunked. */
  chunked?: boolean;
}

const encoded = new WeakMap<BodyPlan, EncodedBody>();

/** The bytes and headers a body plan sends (made once per plan: the oracle and the request share them). */
export function encodeBody(body: BodyPlan): EncodedBody {
  let e = encoded.get(body);
  if (e === undefined) {
    e = encodeOnce(body);
    encoded.set(body, e);
  }
  return e;
}

function encodeOnce(body: BodyPlan): EncodedBody {
  if (body.kind === 'none') return {};
  if (body.kind === 'json') {
    const text = jsonText(body.value) ?? '';
    return { text, bytes: Buffer.from(text, 'utf8'), contentType: body.contentType };
  }
  if (body.kind === 'text') return { text: body.text, bytes: Buffer.from(body.text, 'utf8'), ...(body.contentType === null ? {} : { contentType: body.contentType }) };
  const text = body.value instanceof Bomb ? `{"a":"${'x'.repeat(body.value.bytes)}"}` : jsonText(body.value) ?? '';
  const raw = Buffer.from(text, 'utf8');
  const json = { text, contentType: 'application/json' };
  switch (body.encoding) {
    case 'gzip': return { ...json, bytes: gzipSync(raw), contentEncoding: 'gzip' };
    case 'gzip, gzip': return { ...json, bytes: gzipSync(gzipSync(raw)), contentEncoding: 'gzip, gzip' };
    case 'deflate': return { ...json, bytes: deflateSync(raw), contentEncoding: 'deflate' };
    case 'br': return { ...json, bytes: brotliCompressSync(raw), contentEncoding: 'br' };
    case 'identity': return { ...json, bytes: raw, contentEncoding: 'identity' };
    case 'chunked': return { ...json, bytes: raw, chunked: true };
  }
}
