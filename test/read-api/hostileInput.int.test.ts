import { randomUUID } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { expect } from 'chai';
import { SCOPES } from '../../domain/credentials/scopes';
import { answerText, eventually, postJson } from '../support/motor';
import { createBlockFor } from '../auth/fixtures';
import type { Operation } from './fuzz/arbitraries';
import { operations as allOperations, resolveRef } from './fuzz/openapi';
import { startAuthHarness, type AuthHarness } from '../auth/harness';

/**
 * Hostile input on every route of the OpenAPI document, with a credential that passes: malformed
 * and non-object JSON, each body field with the wrong type or an absurd size, deep nesting,
 * prototype-polluting keys, wrong Content-Type / charset / Content-Encoding, broken percent
 * encoding and oversized path ids, and each query parameter with wrong, repeated and huge values.
 * Every answer must come quickly and be a client error (or a success that ignored the junk) with
 * a JSON body carrying a `code`: never a 5xx, a hang or an HTML page. Routes added later are
 * picked up from read-api/generated/openapi.json automatically.
 */

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const operations: Operation[] = allOperations();
// Destructive routes last, so the fixtures stay in place for every other route.
operations.sort((a, b) => Number(a.method === 'DELETE') - Number(b.method === 'DELETE'));

/** Values (as JSON text) of the wrong type, or absurd ones of the right type, for a schema. */
function hostileValues(schema: Json): Array<[string, string]> {
  const s = resolveRef(schema) ?? {};
  const type = s.type ?? (s.properties ? 'object' : s.enum ? typeof s.enum[0] : 'any');
  return hostileByType(type).map(([what, value]) => [what, JSON.stringify(value)] as [string, string])
    .concat([['deeply nested array', '['.repeat(5000) + ']'.repeat(5000)]]);
}
function hostileByType(type: string): Array<[string, unknown]> {
  const common: Array<[string, unknown]> = [['operator object', { $ne: null, $gt: '' }], ['null', null]];
  switch (type) {
    case 'string': return [...common, ['number', 12345], ['array', ['a', 'b']], ['1 MB string', 'x'.repeat(1 << 20)], ['NUL and CRLF', 'a\u0000b\r\nX-Injected: 1'], ['lone surrogate', '\ud800']];
    case 'integer':
    case 'number': return [...common, ['string', '1; DROP TABLE x'], ['huge', 1e308], ['negative', -1], ['fraction', 1.5], ['2^64', 18446744073709551616]];
    case 'boolean': return [...common, ['string', 'true'], ['number', 1]];
    case 'array': return [...common, ['string', 'not-an-array'], ['array of objects', [{ a: 1 }, {}]], ['100k items', Array.from({ length: 100_000 }, () => 'a')]];
    case 'object': return [...common, ['string', 'str'], ['array', [1, 2]], ['10k keys', Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, i]))]];
    default: return common;
  }
}

interface Case { name: string; url: string; method: string; headers: Record<string, string>; body?: string | Buffer }

describe('hostile input on every route: a 4xx with a code, never a 5xx or a hang (int)', function () {
  this.timeout(300_000);
  let h: AuthHarness;
  const ids = {} as { block: string; message: string; keyId: string; accountKeyId: string; from: string };
  const creds = {} as Record<string, Record<string, string>>;

  before(async () => {
    h = await startAuthHarness({ API_REQUEST_LIMIT: '1000000' });
    const a = await h.signUp('hostile@rcpt.test');
    const block = await createBlockFor(h.motor, a.accountId);
    ids.block = block.motorBlockId;
    ids.from = `app@${block.domain}`;
    const dash = { authorization: `Bearer ${a.token}` };
    const blockKey = await h.post(`/api/motor-blocks/${ids.block}/api-keys`, {}, dash);
    const accountKey = await h.post('/api/account/api-keys', {}, dash);
    const token = await h.post('/api/public/token', { motorBlockId: ids.block, scopes: [...SCOPES] }, dash);
    if (blockKey.status !== 201 || accountKey.status !== 201 || token.status !== 200) throw new Error('fixture credentials');
    ids.keyId = blockKey.body.data.id;
    ids.accountKeyId = accountKey.body.data.id;
    creds.dashboardJwt = dash;
    creds.blockApiKey = { 'x-api-key': blockKey.body.data.key };
    creds.accountApiKey = { 'x-api-key': accountKey.body.data.key };
    creds.publicBearer = { authorization: `Bearer ${token.body.data.token}` };
    const sent = await eventually(async () => {
      const r = await postJson(`${h.motor.baseUrl}/v1/send`, { from: ids.from, to: 'user@rcpt.test', subject: 's', text: 't' }, creds.blockApiKey);
      return r.status === 200 ? r : null;
    });
    ids.message = sent.body.data.id;
  });
  after(async () => { await h?.close(); });

  const pathWith = (op: Operation, override?: string): string => op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    if (override !== undefined) return override;
    if (name === 'keyId') return op.path.startsWith('/api/account/') ? ids.accountKeyId : ids.keyId;
    if (name === 'id') return op.path.includes('/messages') ? ids.message : ids.block;
    return randomUUID();
  });
  /** Required query parameters with plausible values, so the junk in one parameter is what gets judged. */
  const baseQuery = (op: Operation, except?: string): string[] => op.params
    .filter((p) => p.in === 'query' && p.required && p.name !== except)
    .map((p) => {
      const s = resolveRef(p.schema) ?? {};
      const v = Array.isArray(s.enum) ? String(s.enum[0]) : s.type === 'integer' || s.type === 'number' ? '1' : s.type === 'boolean' ? 'false' : 'x';
      return `${p.name}=${encodeURIComponent(v)}`;
    });
  const urlOf = (op: Operation, path: string, query: string[]): string => `${h.motor.baseUrl}${path}${query.length ? `?${query.join('&')}` : ''}`;

  function casesFor(op: Operation): Case[] {
    const headers = { ...(op.scheme ? creds[op.scheme] : {}) };
    const url = urlOf(op, pathWith(op), baseQuery(op));
    const cases: Case[] = [];
    const json = { ...headers, 'content-type': 'application/json' };
    if (op.method !== 'GET' && op.method !== 'DELETE') {
      cases.push({ name: 'malformed JSON', url, method: op.method, headers: json, body: '{"from": ' });
      for (const raw of ['null', '[]', '"text"', '12', 'true']) cases.push({ name: `JSON ${raw}`, url, method: op.method, headers: json, body: raw });
      cases.push({ name: 'prototype keys', url, method: op.method, headers: json, body: '{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}}' });
      cases.push({ name: 'deeply nested', url, method: op.method, headers: json, body: `{"a": ${'['.repeat(10_000)}${']'.repeat(10_000)}}` });
      cases.push({ name: 'text/plain', url, method: op.method, headers: { ...headers, 'content-type': 'text/plain' }, body: '{}' });
      cases.push({ name: 'UTF-16 charset', url, method: op.method, headers: { ...headers, 'content-type': 'application/json; charset=utf-16' }, body: '{}' });
      cases.push({ name: 'gzip that is not gzip', url, method: op.method, headers: { ...json, 'content-encoding': 'gzip' }, body: Buffer.from('not gzip at all') });
      cases.push({ name: 'unknown Content-Encoding', url, method: op.method, headers: { ...json, 'content-encoding': 'br2' }, body: '{}' });
      cases.push({ name: 'invalid UTF-8', url, method: op.method, headers: json, body: Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]) });
      const props = Object.entries((op.bodySchema?.properties ?? {}) as Record<string, Json>);
      for (const [prop, schema] of props) {
        for (const [what, value] of hostileValues(schema)) {
          cases.push({ name: `body.${prop} = ${what}`, url, method: op.method, headers: json, body: `{${JSON.stringify(prop)}: ${value}}` });
        }
      }
    }
    if (op.path.includes('{')) {
      for (const [what, id] of [['not a UUID', 'not-a-uuid'], ['3,000 characters', 'x'.repeat(3000)], ['broken percent-encoding', '%E0%A4%A'], ['NUL', '%00'], ['dot segments', '..%2F..%2Fetc'], ['unknown UUID', randomUUID()]]) {
        const c: Case = { name: `path id: ${what}`, url: urlOf(op, pathWith(op, id), baseQuery(op)), method: op.method, headers: op.method === 'GET' || op.method === 'DELETE' ? headers : json };
        if (op.method !== 'GET' && op.method !== 'DELETE') c.body = '{}';
        cases.push(c);
      }
    }
    for (const p of op.params.filter((q) => q.in === 'query')) {
      const values: Array<[string, string[]]> = [
        ['wrong type', [`${p.name}=%7B%22%24ne%22%3A1%7D`]],
        ['empty', [`${p.name}=`]],
        ['repeated', [`${p.name}=1`, `${p.name}=2`]],
        ['bracketed', [`${p.name}[a]=1`]],
        ['huge number', [`${p.name}=1e999`]],
        ['negative', [`${p.name}=-1`]],
        ['10,000 characters', [`${p.name}=${'z'.repeat(10_000)}`]],
        ['past the 16 KiB header limit', [`${p.name}=${'z'.repeat(20_000)}`]],
        ['broken percent-encoding', [`${p.name}=%E0%A4%A`]],
        ['NUL', [`${p.name}=a%00b`]],
      ];
      if (p.name === 'from' || p.name === 'to') {
        // Dates a parser accepts but a database may not, or that overflow arithmetic on them.
        const inTwoMinutes = new Date(Date.now() + 120_000).toISOString();
        for (const d of [inTwoMinutes, '0000-01-01T00:00:00Z', '-000001-01-01T00:00:00Z', '+275760-09-13T00:00:00Z', '9999-12-31T23:59:59.999Z', '2026-02-30T00:00:00Z', '2026-11-24T25:00:00Z', '1970-01-01', '2026-11-24T00:00:00+99:00', '1e12', 'now']) {
          values.push([`date ${d}`, [`${p.name}=${encodeURIComponent(d)}`]]);
        }
      }
      if (p.name === 'limit' || p.name === 'days') {
        for (const n of ['0', '0.5', '1e-9', 'NaN', 'Infinity', '9007199254740993', '0x10']) values.push([`number ${n}`, [`${p.name}=${n}`]]);
      }
      if (p.name === 'cursor') {
        // Well-formed cursors (base64url JSON of [time, uuid]) whose time JavaScript parses but a database may not.
        const u = randomUUID();
        for (const t of ['0', '12', '2026', 'Tue Nov 24 2026 10:00:00 GMT+0100', '+275760-09-13T00:00:00Z', '-000001-01-01T00:00:00Z', '2026-11-24 10:00:00.1234567', '2026-11-24T10:00:00Z\u0000', '1 2026-11-24', '0000-01-01T00:00:00+00:00', '2026-02-30T00:00:00+00:00', '2026-11-24T10:00:00+23:59', '2026-11-24T24:00:00+00:00']) {
          values.push([`crafted cursor ${JSON.stringify(t)}`, [`${p.name}=${Buffer.from(JSON.stringify([t, u])).toString('base64url')}`]]);
        }
      }
      if (p.name === 'query') {
        // The logs filter language: as many terms as a URL can carry, of each kind, and broken quoting.
        const many = (term: (i: number) => string) => [`${p.name}=${encodeURIComponent(Array.from({ length: 300 }, (_, i) => term(i)).join(' '))}`];
        values.push(
          ['300 recipient terms', many((i) => `recipient:u${i}@rcpt.test`)],
          ['300 metadata terms', many((i) => `metadata.k${i}:"v ${i}"`)],
          ['300 domain and status terms', many((i) => (i % 2 ? `domain:d${i}.test` : 'status:sent'))],
          ['unterminated quote', [`${p.name}=${encodeURIComponent('metadata.a:"open')}`]],
          ['escapes and SQL', [`${p.name}=${encodeURIComponent(`metadata.a:"\\\"' OR 1=1 --" metadata.%_:x recipient:'@x`)}`]],
        );
      }
      for (const [what, q] of values) {
        const c: Case = { name: `query ${p.name}: ${what}`, url: urlOf(op, pathWith(op), [...baseQuery(op, p.name), ...q]), method: op.method, headers: op.method === 'GET' || op.method === 'DELETE' ? headers : json };
        if (op.method !== 'GET' && op.method !== 'DELETE') c.body = '{}';
        cases.push(c);
      }
    }
    for (const p of op.params.filter((q) => q.in === 'header')) {
      for (const [what, value] of [['empty', ''], ['8,000 characters', 'k'.repeat(8000)], ['control characters', 'a\tb'], ['Latin-1 bytes', 'cl\u00e9'], ['JSON', '{"$ne":1}']]) {
        const bodiless = op.method === 'GET' || op.method === 'DELETE';
        cases.push({ name: `header ${p.name}: ${what}`, url, method: op.method, headers: { ...(bodiless ? headers : json), [p.name]: value }, ...(bodiless ? {} : { body: '{}' }) });
      }
    }
    if (op.method === 'POST' && (op.path.startsWith('/api/oauth2/') || op.path === '/free-recipients/confirm' || op.path === '/comm-api/u/{token}')) {
      // Routes that also read application/x-www-form-urlencoded (OAuth, the confirmation and unsubscribe pages' forms).
      const form = { ...headers, 'content-type': 'application/x-www-form-urlencoded' };
      for (const [what, body] of [
        ['repeated and bracketed fields', 'grant_type=authorization_code&grant_type=refresh_token&code[]=a&code[b]=c&token=x&token=y'],
        ['broken percent-encoding', 'grant_type=%E0%A4%A&code=%zz&token=%'],
        ['NUL', 'grant_type=authorization_code&code=a%00b&token=a%00b'],
        ['no equals signs', '&&&&===&&'],
        ['20,000 fields', Array.from({ length: 20_000 }, (_, i) => `f${i}=${i}`).join('&')],
        ['a 1 MB value', `code=${'c'.repeat(1 << 20)}`],
      ] as Array<[string, string]>) {
        cases.push({ name: `form body: ${what}`, url, method: op.method, headers: form, body });
      }
    }
    if (op.path === '/v1/send') {
      // A valid send with one field made hostile: this one reaches the event store.
      const valid = { from: ids.from, to: 'user@rcpt.test', subject: 's', text: 't' };
      const hostile: Array<[string, Record<string, unknown>]> = [
        ['NUL in text', { text: 'a\u0000b' }], ['unpaired surrogate in subject', { subject: 'x\ud800' }],
        ['unpaired surrogate in fromName', { fromName: '\udfff' }], ['NUL in a header value', { headers: { 'X-Tag': 'a\u0000' } }],
        ['unpaired surrogate in a metadata key', { metadata: { ['k\ud800']: 'v' } }], ['NUL in html', { html: '<p>\u0000</p>' }],
      ];
      for (const [what, patch] of hostile) cases.push({ name: `valid send with ${what}`, url, method: op.method, headers: json, body: JSON.stringify({ ...valid, ...patch }) });
    }
    return cases;
  }

  /** Pages for people in a browser: their errors are HTML pages, not JSON (still never a 5xx). */
  const htmlPages = new Set(['/api/oauth2/authorize', '/api/oauth2/consent', '/free-recipients/confirm', '/comm-api/u/{token}',
    '/comm-api/t/c/{token}', '/comm-api/t/o/{token}.gif']);
  /** OAuth 2.0 endpoints answer errors in RFC 6749's shape: `error` (+ `error_description`). */
  const errorCodeOf = (op: Operation, body: Json): unknown => (op.path.startsWith('/api/oauth2/') && typeof body?.error === 'string' && body.code === undefined ? body.error : body?.code);

  let checked = 0;
  after(() => { console.log(`      hostile input: ${operations.length} routes, ${checked} cases`); }); // eslint-disable-line no-console

  for (const op of operations) {
    it(`${op.method} ${op.path}`, async () => {
      const failures: string[] = [];
      for (const c of casesFor(op)) {
        const started = Date.now();
        let status = 0;
        let text = '';
        let type = '';
        try {
          const res = await fetch(c.url, { method: c.method, headers: c.headers, body: c.body, redirect: 'manual', signal: AbortSignal.timeout(10_000) });
          status = res.status;
          type = res.headers.get('content-type') ?? '';
          text = await answerText(res);
        } catch (err) {
          failures.push(`${c.name}: no answer (${(err as Error).message})`);
          continue;
        }
        checked++;
        const ms = Date.now() - started;
        let body: Json = null;
        try { body = JSON.parse(text); } catch { /* judged below */ }
        if (status >= 500) failures.push(`${c.name}: ${status} ${text.slice(0, 200)}`);
        else if (status >= 400 && !htmlPages.has(op.path) && (!type.startsWith('application/json') || typeof errorCodeOf(op, body) !== 'string')) failures.push(`${c.name}: ${status} without a JSON error code (${type}) ${text.slice(0, 120)}`);
        if (ms > 5000) failures.push(`${c.name}: took ${ms} ms`);
      }
      expect(Object.prototype).not.to.have.property('polluted');
      expect(failures, failures.join('\n')).to.deep.equal([]);
    });
  }

  it('methods a path does not declare (and OPTIONS, HEAD) get a 4xx or a bodiless success, never a 5xx', async () => {
    const failures: string[] = [];
    const paths = [...new Set(operations.map((op) => op.path))];
    for (const path of paths) {
      const declared = new Set(operations.filter((op) => op.path === path).map((op) => op.method));
      const op = operations.find((o) => o.path === path)!;
      for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'].filter((m) => !declared.has(m) || m === 'HEAD')) {
        const res = await fetch(urlOf(op, pathWith(op), baseQuery(op)), { method, headers: { ...(op.scheme ? creds[op.scheme] : {}) }, redirect: 'manual', signal: AbortSignal.timeout(10_000) })
          .catch((err: Error) => ({ status: 0, text: async () => err.message, headers: new Headers() }));
        const text = await res.text();
        if (res.status === 0 || res.status >= 500) failures.push(`${method} ${path}: ${res.status} ${text.slice(0, 120)}`);
        else if (res.status >= 400 && method !== 'HEAD' && !htmlPages.has(path) && !/"code":/.test(text)) failures.push(`${method} ${path}: ${res.status} without a code: ${text.slice(0, 120)}`);
      }
    }
    expect(failures).to.deep.equal([]);
  });

  it('a request Node itself refuses (malformed HTTP) still gets the JSON envelope', async () => {
    const port = Number(new URL(h.motor.baseUrl).port);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write('GARBAGE /\u0001 HTTP/9\r\n\r\n'));
      let got = '';
      socket.on('data', (d) => { got += d.toString(); });
      socket.on('end', () => resolve(got));
      socket.on('error', reject);
    });
    expect(raw).to.match(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).to.include({ success: false, code: 'bad_request' });
  });

  it('a refused oversized body leaves no connection that hangs the next request on it', async () => {
    // One keep-alive connection: each refusal is followed by a request on the same socket.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const post = (path: string, body: string, type: string) => new Promise<string>((resolve) => {
      const req = httpRequest(`${h.motor.baseUrl}${path}`, { method: 'POST', agent, headers: { 'content-type': type, 'content-length': Buffer.byteLength(body) } }, (res) => {
        res.resume();
        res.on('end', () => resolve(String(res.statusCode)));
      });
      req.on('error', (e) => resolve(`error ${e.message}`));
      req.setTimeout(5000, () => req.destroy(new Error('no answer within 5 s')));
      req.end(body);
    });
    const oversized: Array<[string, string, string]> = [
      ['/free-recipients/confirm', `token=${'c'.repeat(1 << 20)}`, 'application/x-www-form-urlencoded'],
      ['/api/oauth2/token', `code=${'c'.repeat(1 << 20)}`, 'application/x-www-form-urlencoded'],
      ['/api/auth/login', JSON.stringify({ email: 'x'.repeat(100_000) }), 'application/json'],
      ['/v1/send', JSON.stringify({ text: 'x'.repeat(13 << 20) }), 'application/json'],
    ];
    const got: string[] = [];
    for (const [path, body, type] of oversized) {
      got.push(`${path}: ${await post(path, body, type)}`);
      got.push(`then: ${await post('/api/public/v1/account/free-recipients', '{"a":', 'application/json')}`);
    }
    agent.destroy();
    expect(got.map((g) => g.replace(/: 4\d\d$/, ': 4xx'))).to.deep.equal(oversized.flatMap(([path]) => [`${path}: 4xx`, 'then: 4xx']));
  });

  it('the service still answers afterwards', async () => {
    const r = await fetch(`${h.motor.baseUrl}/v1/status`);
    expect(r.status).to.equal(200);
  });
});
