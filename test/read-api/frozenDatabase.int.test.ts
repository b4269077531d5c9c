import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { TEST_PG_ADMIN_URL } from '../support/db';
import { getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { startPausableProxy, type PausableProxy } from '../support/pausableProxy';
import { senderDomainOf } from './publicApi';

/**
 * A PostgreSQL that stops answering without closing its connections (a frozen host, a network
 * black hole): the requests that need it answer 503 within DATABASE_QUERY_TIMEOUT_MS instead of
 * hanging until the client gives up, and answer normally once it answers again, on new connections
 * (the old ones are never answered: test/support/pausableProxy.ts `abandon`).
 */
describe('PostgreSQL that stops answering (int)', function () {
  this.timeout(60_000);
  const DEADLINE = 1500;
  /** The deadline, a new connection's (also bounded by it) and the test's own overhead. */
  const WITHIN = DEADLINE + 2000;
  let proxy: PausableProxy;
  let motor: TestMotor;
  let a: BootstrapResult;
  let token: string;
  let messageId: string;
  const mail = () => ({ from: `app@${senderDomainOf(a)}`, to: 'user@rcpt.test', subject: 'x', text: 'y' });
  const send = () => postJson(`${motor.baseUrl}/v1/send`, mail(), { 'x-api-key': a.apiKey });
  const read = () => getJson(`${motor.baseUrl}/api/public/v1/messages/${messageId}`, { authorization: `Bearer ${token}` });
  const timed = async <T>(fn: () => Promise<T>): Promise<{ r: T; ms: number }> => {
    const t = Date.now();
    const r = await fn();
    return { r, ms: Date.now() - t };
  };

  before(async () => {
    const target = new URL(TEST_PG_ADMIN_URL);
    proxy = await startPausableProxy({ host: target.hostname, port: Number(target.port || 5432) });
    // The directory cache lives 0 ms here (test/support/motor.ts): every request authenticates cold.
    motor = await startTestMotor({ roles: ['api', 'projector'], databasePort: proxy.port, env: { DATABASE_QUERY_TIMEOUT_MS: String(DEADLINE) } });
    a = await motor.bootstrap();
    token = await motor.token(a, ['logs.read']);
    const sent = await send();
    expect(sent.status).to.equal(200);
    messageId = sent.body.data.id;
    expect((await read()).status).to.equal(200);
  });
  after(async () => {
    proxy?.resume();
    await motor?.close();
    await proxy?.close();
  });

  it('answers 503 event_store_unavailable within the deadline while PostgreSQL does not answer, and normally once it does', async () => {
    proxy.pause();
    const got = await timed(read);
    expect(got.r.status, JSON.stringify(got.r.body)).to.equal(503);
    expect(got.r.body).to.include({ success: false, code: 'event_store_unavailable' });
    expect(got.r.headers.get('retry-after')).to.match(/^\d+$/);
    expect(got.ms).to.be.below(WITHIN);

    const sent = await timed(send);
    expect(sent.r.status, JSON.stringify(sent.r.body)).to.equal(503);
    expect(sent.r.body).to.include({ success: false, code: 'event_store_unavailable' });
    expect(sent.ms).to.be.below(WITHIN);

    // Several at once: none waits for another's connection past the deadline.
    const many = await timed(() => Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? send() : read()))));
    expect(many.r.map((x) => x.status)).to.deep.equal(Array(12).fill(503));
    expect(many.ms).to.be.below(WITHIN);

    const ready = await getJson(`${motor.baseUrl}/readyz`);
    expect(ready.status).to.equal(503);

    proxy.abandon();
    proxy.resume();
    const back = async <T extends { status: number }>(fn: () => Promise<T>): Promise<T> => {
      const until = Date.now() + 15_000;
      for (;;) {
        const r = await fn();
        if (r.status !== 503 || Date.now() > until) return r;
        await new Promise((res) => setTimeout(res, 200));
      }
    };
    expect((await back(read)).status).to.equal(200);
    const again = await back(send);
    expect(again.status, JSON.stringify(again.body)).to.equal(200);
    expect((await back(() => getJson(`${motor.baseUrl}/readyz`))).status).to.equal(200);
  });
});
