import { connect, type Socket } from 'node:net';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../infra/config';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { rawRequest } from '../support/rawHttp';

const MiB = 1024 * 1024;

/**
 * The API process's room for request bodies being read (HTTP_MAX_BUFFERED_BYTES, docs/ERRORS.md
 * 503 `server_busy`): here 12 MiB, the smallest allowed. A request reserves its Content-Length
 * before a byte of its body is read and gives it back with its answer or its connection.
 */
describe('request bodies held at once: HTTP_MAX_BUFFERED_BYTES (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let port: number;
  const open: Socket[] = [];

  before(async () => {
    motor = await startTestMotor({ roles: ['api'], env: { HTTP_MAX_BUFFERED_BYTES: String(12 * MiB) } });
    port = Number(new URL(motor.baseUrl).port);
  });
  afterEach(() => {
    for (const s of open.splice(0)) s.destroy();
  });
  after(async () => { await motor?.close(); });

  /** A POST /v1/send that declares `length` bytes and sends only its first few: it holds its reservation while the socket is open. */
  const uploading = async (length: number): Promise<Socket> => {
    const socket = connect(port, '127.0.0.1');
    open.push(socket);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(`POST /v1/send HTTP/1.1\r\nHost: motor.test\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n{"from":"`);
    return socket;
  };
  const send = (length: number, body = '') =>
    rawRequest(port, [`POST /v1/send HTTP/1.1\r\nHost: motor.test\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n${body}`], { waitMs: 5000 });
  const held = async (): Promise<number> => {
    const text = await (await fetch(`${motor.baseUrl}/metrics`)).text();
    return Number(/^motor_http_buffered_bytes (\d+)/m.exec(text)?.[1] ?? NaN);
  };

  it('is validated: 256 MiB by default, never below one largest body (12 MiB)', () => {
    expect(loadConfig({}).http.maxBufferedBytes).to.equal(256 * MiB);
    expect(loadConfig({ HTTP_MAX_BUFFERED_BYTES: String(12 * MiB) }).http.maxBufferedBytes).to.equal(12 * MiB);
    for (const bad of [String(12 * MiB - 1), '0', '12582912.5', 'lots']) {
      expect(() => loadConfig({ HTTP_MAX_BUFFERED_BYTES: bad }), bad).to.throw(ConfigError, /HTTP_MAX_BUFFERED_BYTES must be an integer between 12582912 and/);
    }
  });

  it('a body that does not fit beside those being read is 503 server_busy with Retry-After, unread, and the connection closes; a small one still fits', async () => {
    await uploading(8 * MiB);
    await eventually(async () => ((await held()) === 8 * MiB ? true : undefined), 5000);
    const refused = await send(8 * MiB);
    expect(refused.status, refused.body).to.equal(503);
    expect(JSON.parse(refused.body)).to.include({ success: false, code: 'server_busy' });
    expect(refused.headers['retry-after']).to.equal('1');
    expect(refused.headers.connection).to.equal('close');
    expect(refused.ms, 'answered without waiting for the body').to.be.below(3000);
    // 8 MiB + a small body fit in 12 MiB: read and judged by the route as usual (no key: 401).
    const small = await send(2, '{}');
    expect(small.status, small.body).to.equal(401);
  });

  it('a reservation is given back when its connection closes mid-body, and when it is answered', async () => {
    const first = await uploading(8 * MiB);
    await eventually(async () => ((await held()) === 8 * MiB ? true : undefined), 5000);
    first.destroy();
    await eventually(async () => ((await held()) === 0 ? true : undefined), 5000);
    // Room again: the same request is now read whole (its body is not JSON: 400), and its room given back.
    const answered = await send(8 * MiB, 'x'.repeat(8 * MiB));
    expect(answered.status, answered.body).to.equal(400);
    expect(JSON.parse(answered.body)).to.include({ code: 'invalid_json' });
    await eventually(async () => ((await held()) === 0 ? true : undefined), 5000);
    // A body without a length (chunked) reserves the largest body: 12 MiB, all the room there is.
    const chunked = await rawRequest(port, ['POST /v1/send HTTP/1.1\r\nHost: motor.test\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n'], { waitMs: 5000 });
    expect(chunked.status, chunked.body).to.equal(401);
    await uploading(1);
    await eventually(async () => ((await held()) === 1 ? true : undefined), 5000);
    const chunkedBusy = await rawRequest(port, ['POST /v1/send HTTP/1.1\r\nHost: motor.test\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n'], { waitMs: 5000 });
    expect(chunkedBusy.status, chunkedBusy.body).to.equal(503);
  });
});
