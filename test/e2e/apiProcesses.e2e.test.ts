import { request } from 'node:http';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { newId } from '../../domain/ids';
import { ConfigError, loadConfig } from '../../infra/config';
import { killOneChild, killUnderLoad, liveChildren as children } from '../support/cluster';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { rawRequest } from '../support/rawHttp';

/** One request on a connection of its own (no keep-alive), so node:cluster deals each to the next child. */
function call(url: string, o: { method?: string; body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<{ status: number; text: string; json: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  return new Promise((resolve, reject) => {
    const body = o.body === undefined ? undefined : JSON.stringify(o.body);
    const req = request(url, { method: o.method ?? 'GET', agent: false, headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...o.headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        let json: unknown = null;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode!, text, json });
      });
    });
    req.on('error', reject);
    if (o.timeoutMs) req.setTimeout(o.timeoutMs, () => req.destroy(new Error('timeout')));
    req.end(body);
  });
}

/**
 * API_PROCESSES=2: the HTTP API runs in two child processes (node:cluster) sharing the port, with
 * the projectors and workers in the primary. Real children of this test process.
 */
describe('HTTP API in several processes (API_PROCESSES)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let block: BootstrapResult;
  let senderDomain: string;

  const send = (extra: Record<string, unknown> = {}, headers: Record<string, string> = {}, timeoutMs?: number) => call(`${motor.baseUrl}/v1/send`, {
    method: 'POST', headers: { 'x-api-key': block.apiKey, ...headers }, timeoutMs,
    body: { from: `app@${senderDomain}`, to: 'someone@rcpt.test', subject: 'From a child', text: 'hi', ...extra },
  });
  const acceptedCounter = async (): Promise<number> => {
    const r = await call(`${motor.baseUrl}/metrics`);
    expect(r.status).to.equal(200);
    const line = r.text.split('\n').find((l) => l.startsWith('motor_sends_accepted_total{source="http"}'));
    return line ? Number(line.split(' ')[1]) : 0;
  };

  before(async () => {
    // A short headers timeout, to see the children apply it (every request here sends its headers at once).
    motor = await startTestMotor({ env: { API_PROCESSES: '2', HTTP_HEADERS_TIMEOUT_SECONDS: '2' } });
    block = await motor.bootstrap();
    senderDomain = block.dnsRecords.find((r) => r.purpose === 'spf')!.name;
  });
  after(async () => {
    await motor?.close();
  });

  it('API_PROCESSES is validated: 1 to 64, default 1', () => {
    expect(loadConfig({}).apiProcesses).to.equal(1);
    expect(loadConfig({ API_PROCESSES: '3' }).apiProcesses).to.equal(3);
    for (const bad of ['0', '65', 'many']) {
      expect(() => loadConfig({ API_PROCESSES: bad }), bad).to.throw(ConfigError, /API_PROCESSES/);
    }
  });

  it('two children serve the port; every 200 is readable by id at once from either child', async () => {
    expect(motor.started.server).to.equal(null);
    expect(children()).to.have.length(2);
    const token = await motor.token(block, ['logs.read']);
    for (let i = 0; i < 10; i++) {
      const r = await send({ subject: `child ${i}` });
      expect(r.status, r.text).to.equal(200);
      // The read goes to the other child than the send (round-robin): no 404 race there either.
      const read = await call(`${motor.baseUrl}/api/public/v1/messages/${r.json.data.id}`, { headers: { authorization: `Bearer ${token}` } });
      expect(read.status, read.text).to.equal(200);
      expect(read.json.data.id).to.equal(r.json.data.id);
    }
  });

  it('Idempotency-Key holds across processes: 40 concurrent requests, one message', async () => {
    const key = `order-${newId()}`;
    const results = await Promise.all(Array.from({ length: 40 }, () => send({ to: 'idem@rcpt.test' }, { 'Idempotency-Key': key })));
    expect(results.map((r) => r.status)).to.deep.equal(Array(40).fill(200));
    expect(new Set(results.map((r) => r.json.data.id)).size).to.equal(1);
    expect(results.filter((r) => r.json.idempotent === true)).to.have.length(39);
  });

  it('the children create their server as the single process does: HTTP timeouts, no-Host answered in the envelope', async () => {
    const port = Number(new URL(motor.baseUrl).port);
    // Two of each, so that both children (round-robin) answer one.
    for (let i = 0; i < 2; i++) {
      const slow = await rawRequest(port, ['POST /v1/send HTTP/1.1\r\nHost: motor.test\r\nContent-Ty'], { waitMs: 20_000 });
      expect([slow.status, JSON.parse(slow.body).code]).to.deep.equal([408, 'request_timeout']);
      expect(slow.ms).to.be.within(1900, 8000);
      const hostless = await rawRequest(port, ['GET /healthz HTTP/1.1\r\n\r\n']);
      expect([hostless.status, JSON.parse(hostless.body).code]).to.deep.equal([400, 'bad_request']);
    }
  });

  it('/metrics from any child adds up every child: the accepted counter is the same whichever answers', async () => {
    const before = await acceptedCounter();
    for (let i = 0; i < 6; i++) expect((await send()).status).to.equal(200);
    const readings = [];
    for (let i = 0; i < 4; i++) readings.push(await acceptedCounter());
    expect(readings).to.deep.equal(Array(4).fill(before + 6));
    // The primary's own metrics are in it too (its projectors' lag gauge).
    expect((await call(`${motor.baseUrl}/metrics`)).text).to.include('motor_projection_lag_events');
  });

  it('a child killed with SIGKILL is replaced; sends keep succeeding meanwhile', async () => {
    const { pid, replacementListening } = await killOneChild();
    for (let i = 0; i < 4; i++) expect((await send()).status).to.equal(200);
    expect(await replacementListening).to.equal(Number(new URL(motor.baseUrl).port));
    expect(children()).to.have.length(2);
    expect(children().map((w) => w.process.pid)).to.not.include(pid);
    await eventually(async () => ((await send()).status === 200 ? true : undefined));
  });

  it('under load, a child killed with SIGKILL loses no acknowledged send: every 200 has its MessageAccepted', async () => {
    // 16 clients sending back to back; the kill lands in the middle of their requests. A client
    // gives up on a request after 5 s, as real ones do: about one connection per kill is never
    // answered (node:cluster's primary was handing it to the child as it died), besides the resets.
    const r = await killUnderLoad({
      clients: 16, each: 50, store: motor.rt.store,
      attempt: async () => { const res = await send({}, {}, 5000); return res.status === 200 ? res.json.data.id : null; },
    });
    expect(r.missing, `${r.missing.length} of ${r.acknowledged.length} acknowledged sends have no event (${r.failed} requests failed)`).to.deep.equal([]);
  });

  it('stop drains the children and closes the port', async () => {
    const pids = children().map((w) => w.process.pid!);
    await motor.started.stop();
    expect(children()).to.have.length(0);
    for (const pid of pids) expect(() => process.kill(pid, 0)).to.throw();
    const refused = await call(`${motor.baseUrl}/healthz`).then(() => false, () => true);
    expect(refused).to.equal(true);
  });
});
