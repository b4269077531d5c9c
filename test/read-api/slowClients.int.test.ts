import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../infra/config';
import { startTestMotor, type TestMotor } from '../support/motor';
import { rawRequest } from '../support/rawHttp';

/**
 * Slow clients (docs/ERRORS.md 408 `request_timeout`): a connection may take
 * HTTP_HEADERS_TIMEOUT_SECONDS to send its headers and HTTP_REQUEST_TIMEOUT_SECONDS to send the
 * whole request; past either it gets 408 in Motor's envelope and is closed. Node's defaults held a
 * POST whose body never came for 300 s, and a silent connection for 60 to 90 s.
 */
describe('slow clients: header and request timeouts (int)', function () {
  this.timeout(60_000);

  it('HTTP_HEADERS_TIMEOUT_SECONDS and HTTP_REQUEST_TIMEOUT_SECONDS are validated: defaults 20 and 60, headers at most the request', () => {
    expect(loadConfig({}).http).to.deep.include({ headersTimeoutSeconds: 20, requestTimeoutSeconds: 60 });
    expect(loadConfig({ HTTP_HEADERS_TIMEOUT_SECONDS: '5', HTTP_REQUEST_TIMEOUT_SECONDS: '300' }).http).to.deep.include({ headersTimeoutSeconds: 5, requestTimeoutSeconds: 300 });
    for (const [name, bad] of [['HTTP_HEADERS_TIMEOUT_SECONDS', '0'], ['HTTP_HEADERS_TIMEOUT_SECONDS', 'soon'], ['HTTP_REQUEST_TIMEOUT_SECONDS', '0'], ['HTTP_REQUEST_TIMEOUT_SECONDS', '3601']]) {
      expect(() => loadConfig({ [name]: bad }), `${name}=${bad}`).to.throw(ConfigError, new RegExp(name));
    }
    expect(() => loadConfig({ HTTP_HEADERS_TIMEOUT_SECONDS: '30', HTTP_REQUEST_TIMEOUT_SECONDS: '10' })).to.throw(ConfigError, /HTTP_HEADERS_TIMEOUT_SECONDS/);
  });

  describe('with the defaults', () => {
    let motor: TestMotor;
    before(async () => { motor = await startTestMotor({ roles: ['api'] }); });
    after(async () => { await motor?.close(); });

    it('the API server has them (20 s for the headers, 60 s for the whole request), keep-alive as before', () => {
      const server = motor.started.server!;
      expect([server.headersTimeout, server.requestTimeout, server.keepAliveTimeout]).to.deep.equal([20_000, 60_000, 65_000]);
    });
  });

  describe('with short timeouts', () => {
    let motor: TestMotor;
    let port: number;
    before(async () => {
      motor = await startTestMotor({ roles: ['api'], env: { HTTP_HEADERS_TIMEOUT_SECONDS: '1', HTTP_REQUEST_TIMEOUT_SECONDS: '2' } });
      port = Number(new URL(motor.baseUrl).port);
    });
    after(async () => { await motor?.close(); });

    const expectTimedOut = (r: { status: number; body: string; ms: number }, within: [number, number]) => {
      expect(r.status, r.body).to.equal(408);
      expect(JSON.parse(r.body)).to.include({ success: false, code: 'request_timeout' });
      expect(r.ms).to.be.within(...within);
    };

    it('a connection that sends nothing gets 408 after the headers timeout', async () => {
      expectTimedOut(await rawRequest(port, [], { waitMs: 15_000 }), [900, 6000]);
    });

    it('headers that never end get 408 after the headers timeout', async () => {
      expectTimedOut(await rawRequest(port, ['POST /v1/send HTTP/1.1\r\nHost: motor.test\r\nContent-Ty'], { waitMs: 15_000 }), [900, 6000]);
    });

    it('a body shorter than its Content-Length gets 408 after the request timeout, not Node\'s 300 s', async () => {
      const r = await rawRequest(port, ['POST /v1/send HTTP/1.1\r\nHost: motor.test\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"from":'], { waitMs: 15_000 });
      expectTimedOut(r, [1900, 8000]);
    });

    it('a body that trickles in too slowly gets 408 too', async () => {
      const drip = Array.from({ length: 30 }, () => ['a', 200] as const).flat();
      const r = await rawRequest(port, ['POST /v1/send HTTP/1.1\r\nHost: motor.test\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n', ...drip], { waitMs: 15_000 });
      expectTimedOut(r, [1900, 8000]);
    });

    it('a request that arrives in time is answered as usual, and keep-alive outlives the headers timeout', async () => {
      const r = await rawRequest(port, ['GET /healthz HTTP/1.1\r\nHost: motor.test\r\n\r\n', 2500, 'GET /healthz HTTP/1.1\r\nHost: motor.test\r\nConnection: close\r\n\r\n'], { waitMs: 15_000 });
      expect(r.status).to.equal(200);
      expect(r.body.match(/HTTP\/1\.1 200/g) ?? []).to.have.length(1, 'a second 200 on the same connection');
    });
  });
});
