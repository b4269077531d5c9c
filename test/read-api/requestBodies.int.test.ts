import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { dashboardUser } from '../oauth/support';
import { startTestMotor, type TestMotor } from '../support/motor';
import { rawRequest } from '../support/rawHttp';

/**
 * The HTTP layer and request bodies (docs/ERRORS.md "Any route: requests the HTTP layer refuses"):
 * a body in a media type the route does not read is refused (415) instead of vanishing and letting
 * an optional-body route run on its defaults; JSON must be UTF-8 (the charset and the bytes); a
 * request without Host, and one whose body ends early, get Motor's envelope; the OAuth token and
 * revocation endpoints answer every malformed request in RFC 6749 §5.2's shape.
 */
describe('request bodies and the HTTP layer (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let port: number;
  let b: BootstrapResult;
  let bearer: Record<string, string>;
  let dashboard: Record<string, string>;
  const exportsPath = () => `/api/public/v1/motor-blocks/${b.motorBlockId}/exports`;
  const blockKeysPath = () => `/api/motor-blocks/${b.motorBlockId}/api-keys`;

  before(async () => {
    // The projector: an export POST answers once its job is readable. The OAuth and page routes are
    // limited per client IP, and every test on this machine is the same IP.
    motor = await startTestMotor({ roles: ['api', 'projector'], env: { ANONYMOUS_REQUEST_LIMIT: '100000' } });
    port = Number(new URL(motor.baseUrl).port);
    b = await motor.bootstrap();
    bearer = { authorization: `Bearer ${await motor.token(b, ['analytics.read', 'logs.read'])}` };
    dashboard = { authorization: `Bearer ${(await dashboardUser(motor, b.accountId)).token}` };
  });
  after(async () => { await motor?.close(); });

  const post = async (path: string, headers: Record<string, string>, body?: string | Buffer) => {
    const res = await fetch(`${motor.baseUrl}${path}`, { method: 'POST', headers, body });
    const text = await res.text();
    let json: any = null; // eslint-disable-line @typescript-eslint/no-explicit-any
    try { json = JSON.parse(text); } catch { /* judged by the caller */ }
    return { status: res.status, json, text, headers: res.headers };
  };
  const blockKeyCount = async () => {
    const r = await fetch(`${motor.baseUrl}${blockKeysPath()}`, { headers: dashboard });
    return ((await r.json()) as { data: unknown[] }).data.length;
  };

  describe('a body in a media type the route does not read', () => {
    const NOT_JSON: Array<[string, string]> = [
      ['text/plain', '{"format":"xlsx"}'],
      ['text/plain;charset=UTF-8', '{"format":"xlsx"}'],
      ['application/x-www-form-urlencoded', 'format=xlsx'],
      ['multipart/form-data; boundary=xyz', '--xyz\r\nContent-Disposition: form-data; name="format"\r\n\r\nxlsx\r\n--xyz--\r\n'],
      ['application/xml', '<format>xlsx</format>'],
      ['not a media type', '{"format":"xlsx"}'],
    ];

    it('an export POST is refused with 415 unsupported_media_type, not queued with the defaults (as JSON the same body is 422)', async () => {
      const asJson = await post(exportsPath(), { ...bearer, 'content-type': 'application/json' }, '{"format":"xlsx"}');
      expect([asJson.status, asJson.json.code]).to.deep.equal([422, 'validation_error']);
      for (const [type, body] of NOT_JSON) {
        const r = await post(exportsPath(), { ...bearer, 'content-type': type }, body);
        expect([r.status, r.json?.code], type).to.deep.equal([415, 'unsupported_media_type']);
      }
      const list = await fetch(`${motor.baseUrl}${exportsPath()}`, { headers: bearer });
      expect(((await list.json()) as { data: unknown[] }).data).to.deep.equal([]);
    });

    it('a body without any Content-Type (Content-Length or chunked) is refused the same way', async () => {
      const head = (framing: string) => `POST ${exportsPath()} HTTP/1.1\r\nHost: motor.test\r\nAuthorization: ${bearer.authorization}\r\n${framing}Connection: close\r\n\r\n`;
      const sized = await rawRequest(port, [head('Content-Length: 17\r\n') + '{"format":"xlsx"}']);
      const chunked = await rawRequest(port, [head('Transfer-Encoding: chunked\r\n') + '11\r\n{"format":"xlsx"}\r\n0\r\n\r\n']);
      for (const r of [sized, chunked]) expect([r.status, JSON.parse(r.body).code]).to.deep.equal([415, 'unsupported_media_type']);
    });

    it('a block key POST with a text/plain body creates no key (as JSON the body is 400)', async () => {
      const before = await blockKeyCount();
      const asJson = await post(blockKeysPath(), { ...dashboard, 'content-type': 'application/json' }, '{"x":1}');
      expect(asJson.status).to.equal(400);
      for (const [type, body] of NOT_JSON) {
        const r = await post(blockKeysPath(), { ...dashboard, 'content-type': type }, body);
        expect([r.status, r.json?.code], type).to.deep.equal([415, 'unsupported_media_type']);
      }
      expect(await blockKeyCount()).to.equal(before);
    });

    it('a POST with no body at all still runs on the defaults (export queued, key created)', async () => {
      const exported = await post(exportsPath(), bearer);
      expect(exported.status, exported.text).to.equal(202);
      const emptyButTyped = await post(exportsPath(), { ...bearer, 'content-type': 'text/plain' }, '');
      expect(emptyButTyped.status, emptyButTyped.text).to.equal(202);
      const key = await post(blockKeysPath(), dashboard);
      expect(key.status, key.text).to.equal(201);
    });

    it('JSON with a +json media type is read as JSON', async () => {
      const r = await post(exportsPath(), { ...bearer, 'content-type': 'application/vnd.motor+json' }, '{"format":"xlsx"}');
      expect([r.status, r.json.code]).to.deep.equal([422, 'validation_error']);
    });

    it('the form routes keep reading forms: OAuth token, revoke and consent, the confirmation and unsubscribe pages', async () => {
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      const token = await post('/api/oauth2/token', form, 'grant_type=authorization_code&client_id=00000000-0000-4000-8000-000000000000&client_secret=x&code=c&redirect_uri=https://x.test/cb');
      expect([token.status, token.json.error]).to.deep.equal([400, 'invalid_client']);
      const revoke = await post('/api/oauth2/revoke', form, 'token=nothing&client_id=00000000-0000-4000-8000-000000000000&client_secret=x');
      expect([revoke.status, revoke.json.error]).to.deep.equal([400, 'invalid_client']);
      const consent = await post('/api/oauth2/consent', { ...form, ...dashboard }, 'form_token=nope&decision=approve');
      expect([consent.status, consent.json.error]).to.deep.equal([400, 'invalid_request']);
      const confirm = await post('/free-recipients/confirm', form, 'token=nope');
      expect([confirm.status, confirm.headers.get('content-type')?.split(';')[0]]).to.deep.equal([404, 'text/html']);
      // RFC 8058 one-click: mail providers post it as a form, multipart included; the page reads any body.
      for (const type of ['application/x-www-form-urlencoded', 'multipart/form-data; boundary=xyz', 'text/plain']) {
        const unsub = await post('/comm-api/u/not-a-token', { 'content-type': type }, 'List-Unsubscribe=One-Click');
        expect(unsub.status, type).to.equal(404);
      }
    });

    it('a route that only reads forms still refuses text/plain (415), and the OAuth endpoints say it their way', async () => {
      const confirm = await post('/free-recipients/confirm', { 'content-type': 'text/plain' }, 'token=nope');
      expect([confirm.status, confirm.json.code]).to.deep.equal([415, 'unsupported_media_type']);
      for (const path of ['/api/oauth2/token', '/api/oauth2/revoke']) {
        const r = await post(path, { 'content-type': 'text/plain' }, 'grant_type=refresh_token');
        expect([r.status, r.json.error, r.json.code], path).to.deep.equal([415, 'invalid_request', undefined]);
        expect(r.headers.get('cache-control'), path).to.equal('no-store');
      }
    });
  });

  describe('JSON is UTF-8', () => {
    it('a charset other than UTF-8 is 415 unsupported_encoding (utf-16 and utf-32 too, not a parse error)', async () => {
      for (const charset of ['utf-16', 'UTF-16LE', 'utf-32', 'latin1', 'iso-8859-1']) {
        const r = await post(exportsPath(), { ...bearer, 'content-type': `application/json; charset=${charset}` }, '{}');
        expect([r.status, r.json.code], charset).to.deep.equal([415, 'unsupported_encoding']);
      }
      for (const charset of ['utf-8', 'UTF-8', '"utf-8"']) {
        const r = await post(exportsPath(), { ...bearer, 'content-type': `application/json; charset=${charset}` }, '{}');
        expect(r.status, charset).to.equal(202);
      }
    });

    it('a body that is not valid UTF-8 is 400 invalid_json, not decoded with U+FFFD and accepted', async () => {
      const latin1 = Buffer.concat([Buffer.from('{"query":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]);
      for (const body of [latin1, Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), Buffer.from([0x7b, 0x7d, 0xc3])]) {
        const r = await post(exportsPath(), { ...bearer, 'content-type': 'application/json' }, body);
        expect([r.status, r.json.code], body.toString('hex')).to.deep.equal([400, 'invalid_json']);
      }
      // Valid UTF-8 beyond ASCII is read: the route sees the value and judges it.
      const good = await post(exportsPath(), { ...bearer, 'content-type': 'application/json' }, Buffer.from('{"jobType":"café"}'));
      expect([good.status, good.json.code]).to.deep.equal([400, 'invalid_job_type']);
    });
  });

  describe('the OAuth token and revocation endpoints answer RFC 6749 §5.2 errors for every malformed request', () => {
    const json = { 'content-type': 'application/json' };
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const cases: Array<[string, Record<string, string>, string | Buffer]> = [
      ['JSON with a field of the wrong type', json, '{"grant_type":5,"token":5,"client_id":"x"}'],
      ['JSON with an object for client_id', json, '{"grant_type":"refresh_token","client_id":{"$ne":null}}'],
      ['JSON that is not an object', json, '["grant_type"]'],
      ['JSON null', json, 'null'],
      ['malformed JSON', json, '{"grant_type":'],
      ['JSON with U+0000', json, '{"grant_type":"refresh_token","refresh_token":"a\\u0000"}'],
      ['JSON that is not UTF-8', json, Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])],
      ['a form without grant_type', form, 'client_id=x'],
      ['a form with 21 parameters', form, Array.from({ length: 21 }, (_, i) => `p${i}=1`).join('&')],
    ];
    for (const path of ['/api/oauth2/token', '/api/oauth2/revoke']) {
      it(`${path}: 400 invalid_request, never Motor's envelope`, async () => {
        const got = [];
        for (const [what, headers, body] of cases) {
          const r = await post(path, headers, body);
          // The revocation endpoint checks the client before anything else in a well-formed body.
          const expected = path.endsWith('/revoke') && what === 'a form without grant_type' ? 'invalid_request|invalid_client' : 'invalid_request';
          got.push(`${what}: ${r.status} ${new RegExp(`^(${expected})$`).test(r.json?.error) ? 'ok' : r.json?.error} ${r.json?.code === undefined && typeof r.json?.error_description === 'string' ? 'rfc' : r.text.slice(0, 80)} ${r.headers.get('cache-control')}`);
        }
        expect(got).to.deep.equal(cases.map(([what]) => `${what}: 400 ok rfc no-store`));
      });
    }

    it('the form and the JSON of one request get the same answer', async () => {
      const viaForm = await post('/api/oauth2/token', form, 'client_id=x&grant_type=refresh_token');
      const viaJson = await post('/api/oauth2/token', json, '{"client_id":"x","grant_type":"refresh_token"}');
      expect(viaJson.json).to.deep.equal(viaForm.json);
      expect(viaForm.status).to.equal(viaJson.status);
    });
  });

  describe('requests Node parses but the app must answer in its envelope', () => {
    it('an HTTP/1.1 request without Host is 400 bad_request with the envelope (HTTP/1.0 needs none)', async () => {
      const r = await rawRequest(port, ['GET /healthz HTTP/1.1\r\n\r\n']);
      expect(r.status).to.equal(400);
      expect(r.headers['content-type']).to.match(/^application\/json/);
      expect(JSON.parse(r.body)).to.include({ success: false, code: 'bad_request' });
      const old = await rawRequest(port, ['GET /healthz HTTP/1.0\r\n\r\n']);
      expect(old.status).to.equal(200);
      const withHost = await rawRequest(port, ['GET /healthz HTTP/1.1\r\nHost: motor.test\r\nConnection: close\r\n\r\n']);
      expect(withHost.status).to.equal(200);
    });

    it('a body that ends before its Content-Length (the client closed its side) is 400 invalid_body', async () => {
      const r = await rawRequest(port, [`POST ${exportsPath()} HTTP/1.1\r\nHost: motor.test\r\nAuthorization: ${bearer.authorization}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"format":`], { end: true });
      expect(r.status).to.equal(400);
      expect(JSON.parse(r.body)).to.include({ success: false, code: 'invalid_body' });
    });

    it('headers that end early (the client closed its side) stay 400 bad_request', async () => {
      const r = await rawRequest(port, ['POST /v1/send HTTP/1.1\r\nHost: motor.test\r\nContent-Le'], { end: true });
      expect(r.status).to.equal(400);
      expect(JSON.parse(r.body)).to.include({ success: false, code: 'bad_request' });
    });
  });

  describe('a body value that is not a string, number, boolean or null where the schema names values', () => {
    // JSON makes `{"toString": 1}` an object that String() cannot print: tsoa matched enum members on
    // String(value), threw a TypeError, and the request was a 500. `["txt"]` printed as "txt" and passed.
    const sendBody = { from: 'app@example.test', to: 'ada@example.test', subject: 's', text: 't', dryRun: true };
    const cases: Array<[string, string, () => Record<string, string>, string, number]> = [
      ['an object for an enum (dkimMode)', '/api/domains', () => dashboard, '{"domain":"enum.example.test","dkimMode":{"toString":1}}', 400],
      ['an array for an enum (dkimMode)', '/api/domains', () => dashboard, '{"domain":"enum.example.test","dkimMode":["txt"]}', 400],
      ['an object for an enum (test-email method)', '/v1/test-email', () => ({ 'x-api-key': b.apiKey }),
        JSON.stringify({ method: { toString: 1 }, host: 'localhost', port: 2587, username: 'u', password: 'p', to: 'ada@example.test' }), 422],
      ['an object for string or null (fromName)', '/v1/send', () => ({ 'x-api-key': b.apiKey }), JSON.stringify({ ...sendBody, fromName: { toString: 1, valueOf: 1 } }), 422],
    ];
    for (const [what, path, headers, body, status] of cases) {
      it(`${what} is ${status} validation_error`, async () => {
        const r = await post(path, { ...headers(), 'content-type': 'application/json' }, body);
        expect([r.status, r.json?.code], r.text.slice(0, 200)).to.deep.equal([status, 'validation_error']);
      });
    }
  });
});
