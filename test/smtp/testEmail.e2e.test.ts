import { createServer, type AddressInfo } from 'node:net';
import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import type { MessageAccepted } from '../../domain/events';
import { testEmail } from '../../commands/send/testEmail';
import { eventually, postJson } from '../support/motor';
import { startSmtpHarness, type SmtpHarness } from './harness';

const freePort = () => new Promise<number>((resolve, reject) => {
  const s = createServer();
  s.on('error', reject);
  s.listen(0, '127.0.0.1', () => { const { port } = s.address() as AddressInfo; s.close(() => resolve(port)); });
});

/**
 * POST /v1/test-email (SPEC "Send API", docs/SMTP.md "Testing an SMTP setup"): Motor uses the
 * settings it is given against its own SMTP listener, over real sockets, and sends one real test
 * message through the SMTP path to the loopback MX.
 */
describe('POST /v1/test-email (e2e)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;
  let block: Awaited<ReturnType<SmtpHarness['newBlock']>>;

  before(async () => {
    // The listeners on the ports configured for them: those (SMTP_PUBLIC_PORTS unset) are the ones the check may contact.
    h = await startSmtpHarness({ env: { SMTP_PORT: String(await freePort()), SMTPS_PORT: String(await freePort()) } });
    block = await h.newBlock();
  });
  after(async () => {
    await h?.close();
  });

  const check = (body: Record<string, unknown>, key = block.apiKey, headers: Record<string, string> = {}) =>
    postJson(`${h.motor.baseUrl}/v1/test-email`, body, { 'X-Api-Key': key, ...headers });
  const settings = (o: Record<string, unknown> = {}) => ({
    method: 'starttls', host: 'localhost', port: h.port, username: block.smtpUsername, password: block.smtpPassword, to: 'tester@rcpt.test', subject: 'SMTP check', ...o,
  });

  it('STARTTLS with the block\'s credentials: ok, over TLS, authenticated; the test message goes the SMTP path to the MX', async () => {
    const r = await check(settings({ subject: 'SMTP check starttls' }));
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.data).to.include({ ok: true, method: 'starttls', host: 'localhost', port: h.port, tls: true, authenticated: true, failedStage: null, error: null, smtpCode: 250 });
    expect(r.body.data.messageId).to.match(/^[0-9a-f-]{36}$/);
    const [accepted] = await h.motor.rt.store.readStream(streamName('message', r.body.data.messageId));
    expect((accepted.data as MessageAccepted)).to.include({ source: 'smtp', subject: 'SMTP check starttls', motorBlockId: block.motorBlockId });
    await eventually(async () => h.mx.messages.find((m) => m.raw.toString().includes('SMTP check starttls')), 20_000);
  });

  it('implicit TLS on the secure port: ok', async () => {
    const r = await check(settings({ method: 'ssl', port: h.securePort, subject: 'SMTP check ssl' }));
    expect(r.status).to.equal(200);
    expect(r.body.data).to.include({ ok: true, tls: true, authenticated: true });
  });

  it('a wrong password fails at auth with the server\'s 535, answered 200 with ok false', async () => {
    const r = await check(settings({ password: 'not-the-password' }));
    expect(r.status).to.equal(200);
    expect(r.body.data).to.include({ ok: false, failedStage: 'auth', error: 'authentication_failed', smtpCode: 535, authenticated: false, messageId: null });
    expect(r.body.message).to.match(/failed at auth/);
  });

  it('failed logins count against the caller\'s address, not the API host\'s: one tenant\'s wrong passwords never slow down or lock out another\'s test', async () => {
    const other = await h.newBlock();
    const counter = (address: string) => h.motor.rt.smtpAuthLimiter.addressFailures(address);
    const apiHostBefore = await counter('127.0.0.1');
    const caller = { 'X-Forwarded-For': '198.51.100.7' };
    for (let i = 0; i < 3; i++) {
      const r = await check(settings({ password: 'not-the-password' }), block.apiKey, caller);
      expect(r.body.data, `attempt ${i + 1}`).to.include({ ok: false, failedStage: 'auth', error: 'authentication_failed', smtpCode: 535 });
      expect(r.body.data.smtpResponse).to.equal('535 5.7.8 Authentication credentials invalid');
    }
    expect(await counter('198.51.100.7'), 'counted on the caller').to.equal(3);
    expect(await counter('127.0.0.1'), 'not on the API host, whose connection every tenant\'s test shares').to.equal(apiHostBefore);
    const filed = (await h.motor.rt.store.readStream(streamName('smtpAuth', block.motorBlockId))).map((e) => e.data as { remoteAddress: string; reason: string });
    expect(filed.filter((f) => f.remoteAddress === '198.51.100.7').map((f) => f.reason)).to.deep.equal(['bad_password', 'bad_password', 'bad_password']);

    // The caller is now slowed down (the listener's rules: past 3 failures, 250 ms and doubling)...
    const slowed = await check(settings({ password: 'not-the-password' }), block.apiKey, caller);
    expect(slowed.body.data.failedStage).to.equal('auth');
    expect(slowed.body.data.durationMs).to.be.at.least(250);
    // ...another tenant, elsewhere, is not: its right password passes and its message is sent.
    const fine = await check({ ...settings({ subject: 'SMTP check other tenant' }), username: other.smtpUsername, password: other.smtpPassword }, other.apiKey, { 'X-Forwarded-For': '203.0.113.9' });
    expect(fine.body.data, JSON.stringify(fine.body)).to.include({ ok: true, authenticated: true, failedStage: null });
  });

  it('the SMTP port of a listener that is down fails at connect', async () => {
    // The API of a deployment whose SMTP role (its own process) is down: nothing listens on its SMTP_PORT.
    // The check itself, on this Motor's directory and AUTH, with that configuration (a second Motor costs ~10 s here).
    const down = await freePort();
    const config = { ...h.motor.config, smtp: { ...h.motor.config.smtp, port: down }, smtpPublicPorts: [down, h.securePort] };
    const r = await testEmail({ directory: h.motor.rt.directory, config, smtpAuth: h.motor.rt.http.smtpAuth }, block.motorBlockId, settings({ port: down }), '127.0.0.1');
    expect(r).to.include({ ok: false, failedStage: 'connect', error: 'connection_failed', port: down, authenticated: false });
  });

  it('a block that logs in with a client certificate (mTLS): connection and TLS tested, the login not tried (it cannot present the certificate)', async () => {
    const directory = h.motor.rt.directory;
    const asMtls = Object.create(directory, { block: { value: async (id: string) => ({ ...(await directory.block(id))!, authMethod: 'mtls' }) } });
    let logins = 0;
    const smtpAuth: typeof h.motor.rt.http.smtpAuth = async (a) => { logins += 1; return h.motor.rt.http.smtpAuth(a); };
    const r = await testEmail({ directory: asMtls, config: h.motor.config, smtpAuth }, block.motorBlockId, settings(), '127.0.0.1');
    expect(r).to.include({ ok: false, tls: true, authenticated: false, failedStage: 'auth', error: 'client_certificate_required' });
    expect(logins, 'no failed login counted against the caller').to.equal(0);
  });

  it('implicit TLS on the STARTTLS port fails before auth', async () => {
    const wrongTls = await check(settings({ method: 'ssl' }));
    expect(wrongTls.body.data.ok).to.equal(false);
    expect(wrongTls.body.data.failedStage).to.be.oneOf(['connect', 'tls']);
  });

  it('without TLS the listener does not offer AUTH: fails, never authenticated', async () => {
    const r = await check(settings({ method: 'none' }));
    expect(r.status).to.equal(200);
    expect(r.body.data).to.include({ ok: false, authenticated: false, tls: false });
  });

  it('contacts no other port of the host: a port that is not an SMTP listener\'s is refused before any connection', async () => {
    // Something listens there (on Motor's own host): the check must not tell whether it does.
    let connections = 0;
    const other = createServer((socket) => { connections++; socket.destroy(); });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', () => resolve()));
    const port = (other.address() as AddressInfo).port;
    try {
      for (const p of [port, 22, 5432, 6379, h.mx.port]) {
        const r = await check(settings({ port: p }));
        expect([r.status, r.body.code], String(p)).to.deep.equal([422, 'smtp_port_not_allowed']);
        expect(r.body, String(p)).to.deep.include({ field: 'port', allowed: [h.port, h.securePort] });
      }
      // Open, closed or silent, every such port gets the same answer: no connection tells them apart.
      await new Promise((r) => setTimeout(r, 200));
      expect(connections, 'connections to the non-SMTP port').to.equal(0);
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it('contacts no other host, tests only the key\'s own block, and refuses malformed settings', async () => {
    for (const host of ['127.0.0.1', 'smtp.gmail.com', 'localhost.evil.test']) {
      const r = await check(settings({ host }));
      expect([r.status, r.body.code], host).to.deep.equal([422, 'smtp_host_not_allowed']);
    }
    const other = await h.newBlock();
    const r = await check(settings({ username: other.smtpUsername, password: other.smtpPassword }));
    expect([r.status, r.body.code]).to.deep.equal([422, 'smtp_username_mismatch']);
    for (const bad of [{ method: 'carrier-pigeon' }, { port: 0 }, { port: 70000 }, { to: 'not an address' }, { subject: 'two\r\nlines' }, { requireTLS: 'yes' }, { password: '' }]) {
      const b = await check(settings(bad));
      expect(b.status, JSON.stringify(bad)).to.equal(422);
    }
    expect((await check(settings(), block.accountApiKey)).status, 'an account key is not a block key').to.equal(401);
  });
});
