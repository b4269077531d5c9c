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
    // The projector: an export POST answers once its job is readable.
    motor = await startTestMotor({ roles: ['api', 'projector'] });
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
});
