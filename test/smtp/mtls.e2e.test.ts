import { rmSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { expect } from 'chai';
import nodemailer from 'nodemailer';
import { streamName } from '../../domain/eventStore';
import type { MotorBlockAuthMethodChanged, SmtpAuthFailed, SmtpClientCertificateRegistered } from '../../domain/events';
import { asDomainEvent } from '../../domain/events';
import { getBlock } from '../../projections/directory/queries';
import { dashboardUser } from '../oauth/support';
import { eventually, getJson } from '../support/motor';
import { issueClientCert, makeCa, type ClientCert, type TestCa } from './certs';
import { rfc822, startSmtpHarness, type SmtpHarness } from './harness';

async function putJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'PUT', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  let json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: res.status, body: json };
}

/**
 * mTLS end to end (SPEC credential map: client certificate plus username and password): real
 * certificates from openssl (a client CA, a client certificate registered for the block, another
 * one of the same CA, one of another CA), the dashboard routes that register the certificate and
 * switch the method, and nodemailer over STARTTLS and implicit TLS.
 */
describe('SMTP mTLS (e2e)', function () {
  this.timeout(90_000);
  let h: SmtpHarness;
  let block: Awaited<ReturnType<SmtpHarness['newBlock']>>;
  let ca: TestCa;
  let otherCa: TestCa;
  let good: ClientCert;
  let sibling: ClientCert;
  let foreign: ClientCert;
  let owner: { token: string };
  let stranger: { token: string };
  const url = (path: string) => `${h.motor.baseUrl}/api/motor-blocks/${block.motorBlockId}${path}`;
  const auth = (u: { token: string }) => ({ authorization: `Bearer ${u.token}` });

  const mtlsTransport = (o: { pass?: string; client?: ClientCert | null; secure?: boolean }) => nodemailer.createTransport({
    host: '127.0.0.1', port: o.secure ? h.securePort : h.port, secure: o.secure ?? false, requireTLS: !o.secure,
    auth: { user: block.smtpUsername, pass: o.pass ?? block.smtpPassword },
    tls: { ca: [h.ca], servername: 'localhost', ...(o.client ? { cert: o.client.cert, key: o.client.key } : {}) },
    connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 20_000,
  });
  const send = async (o: Parameters<typeof mtlsTransport>[0], subject = 'over mTLS') => {
    const t = mtlsTransport(o);
    try {
      return await t.sendMail({ envelope: { from: `app@${block.domain}`, to: ['mtls@rcpt.test'] }, raw: rfc822({ from: `app@${block.domain}`, to: 'mtls@rcpt.test', subject }) });
    } finally {
      t.close();
    }
  };
  const refusal = async (o: Parameters<typeof mtlsTransport>[0]) => {
    try {
      await send(o);
    } catch (err) {
      return err as Error & { responseCode?: number; response?: string };
    }
    throw new Error('the login was accepted');
  };
  const failures = async () => (await h.motor.rt.store.readStream(streamName('smtpAuth', block.motorBlockId))).map((e) => e.data as SmtpAuthFailed);

  before(async () => {
    ca = makeCa('Motor test client CA');
    otherCa = makeCa('Somebody else CA');
    good = issueClientCert(ca, 'app-1.client.test');
    sibling = issueClientCert(ca, 'app-2.client.test');
    foreign = issueClientCert(otherCa, 'app-1.client.test');
    h = await startSmtpHarness({ env: { SMTP_CLIENT_CA: ca.certPath } });
    block = await h.newBlock();
    owner = await dashboardUser(h.motor, block.accountId);
    const other = await h.motor.bootstrap({ trustDns: true });
    stranger = await dashboardUser(h.motor, other.accountId);
  });
  after(async () => {
    await h?.close();
    for (const c of [ca, otherCa]) if (c) rmSync(c.dir, { recursive: true, force: true });
  });

  it('without a registered certificate the block cannot switch to mtls (409 client_certificate_missing)', async () => {
    const r = await putJson(url('/smtp/auth-method'), { authMethod: 'mtls' }, auth(owner));
    expect(r.status, JSON.stringify(r.body)).to.equal(409);
    expect(r.body.code).to.equal('client_certificate_missing');
    const g = await getJson(url('/smtp/auth-method'), auth(owner));
    expect(g.status).to.equal(200);
    expect(g.body.data).to.include({ authMethod: 'smtp_password', clientCertificate: null, smtpUsername: block.smtpUsername });
  });

  it('refuses bad uploads: not PEM, a private key, a CA certificate, a certificate of another CA; unknown methods', async () => {
    const cases: Array<[unknown, number, string]> = [
      [{ certificate: 'hello' }, 400, 'validation_error'],
      [{}, 400, 'validation_error'],
      [{ certificate: `${good.cert.toString()}\n${good.key.toString()}` }, 400, 'validation_error'],
      [{ certificate: ca.cert.toString() }, 400, 'validation_error'],
      [{ certificate: `${good.cert.toString()}${sibling.cert.toString()}` }, 400, 'validation_error'],
      [{ certificate: foreign.cert.toString() }, 422, 'client_certificate_untrusted'],
    ];
    for (const [body, status, code] of cases) {
      const r = await putJson(url('/smtp/client-certificate'), body, auth(owner));
      expect(r.status, JSON.stringify(r.body)).to.equal(status);
      expect(r.body.code).to.equal(code);
    }
    const m = await putJson(url('/smtp/auth-method'), { authMethod: 'kerberos' }, auth(owner));
    expect(m.status).to.equal(400);
    expect(m.body.code).to.equal('validation_error');
  });

  it('another account (404), no token (401), a malformed id (400)', async () => {
    expect((await putJson(url('/smtp/client-certificate'), { certificate: good.cert.toString() }, auth(stranger))).status).to.equal(404);
    expect((await putJson(url('/smtp/auth-method'), { authMethod: 'api_key' }, auth(stranger))).status).to.equal(404);
    expect((await getJson(url('/smtp/auth-method'), auth(stranger))).status).to.equal(404);
    expect((await getJson(url('/smtp/auth-method'))).status).to.equal(401);
    expect((await getJson(`${h.motor.baseUrl}/api/motor-blocks/not-a-uuid/smtp/auth-method`, auth(owner))).status).to.equal(400);
  });

  it('registers the certificate (fingerprint only) and switches the block to mtls; the directory follows at once', async () => {
    const r = await putJson(url('/smtp/client-certificate'), { certificate: good.cert.toString() }, auth(owner));
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    const x = new X509Certificate(good.cert);
    expect(r.body.data.clientCertificate).to.include({ fingerprint256: x.fingerprint256, subject: 'CN=app-1.client.test', issuer: 'CN=Motor test client CA' });
    const events = (await h.motor.rt.store.readStream(streamName('motorBlock', block.motorBlockId))).map(asDomainEvent);
    const registered = events.find((e) => e?.type === 'SmtpClientCertificateRegistered')!.data as SmtpClientCertificateRegistered;
    expect(registered.fingerprint256).to.equal(x.fingerprint256);
    expect(JSON.stringify(registered)).not.to.include('BEGIN CERTIFICATE');

    const m = await putJson(url('/smtp/auth-method'), { authMethod: 'mtls' }, auth(owner));
    expect(m.status, JSON.stringify(m.body)).to.equal(200);
    expect(m.body.data.authMethod).to.equal('mtls');
    const changed = (await h.motor.rt.store.readStream(streamName('motorBlock', block.motorBlockId))).map(asDomainEvent).filter((e) => e?.type === 'MotorBlockAuthMethodChanged');
    expect(changed.map((e) => e!.data as MotorBlockAuthMethodChanged).map((d) => [d.previousAuthMethod, d.authMethod])).to.deep.equal([['smtp_password', 'mtls']]);
    expect((await getBlock(h.motor.rt.db, block.motorBlockId))!.authMethod).to.equal('mtls');
    // The same method again: unchanged, no second event.
    expect((await putJson(url('/smtp/auth-method'), { authMethod: 'mtls' }, auth(owner))).status).to.equal(200);
    expect((await h.motor.rt.store.readStream(streamName('motorBlock', block.motorBlockId))).map(asDomainEvent).filter((e) => e?.type === 'MotorBlockAuthMethodChanged')).to.have.length(1);
  });

  it('the registered certificate plus the password logs in: STARTTLS and implicit TLS, delivered to the MX', async () => {
    const a = await send({ client: good }, 'mTLS over STARTTLS');
    expect(a.response).to.match(/^250 2\.6\.0 /);
    const b = await send({ client: good, secure: true }, 'mTLS over implicit TLS');
    expect(b.response).to.match(/^250 2\.6\.0 /);
    await eventually(async () => h.mx.messages.some((m) => m.raw.toString().includes('mTLS over STARTTLS')) && h.mx.messages.some((m) => m.raw.toString().includes('mTLS over implicit TLS')), 20_000);
  });

  it('refused with 535 and a SmtpAuthFailed reason: no certificate, another CA, a sibling of the same CA, a wrong password', async () => {
    const before = (await failures()).length;
    const noCert = await refusal({ client: null });
    expect(noCert.responseCode).to.equal(535);
    expect(noCert.response).to.include('mTLS');
    const foreignErr = await refusal({ client: foreign, secure: true });
    expect(foreignErr.responseCode).to.equal(535);
    const siblingErr = await refusal({ client: sibling });
    expect(siblingErr.responseCode).to.equal(535);
    expect(siblingErr.response).to.include('not the one registered');
    const wrongPassword = await refusal({ client: good, pass: 'not-the-password' });
    expect(wrongPassword.responseCode).to.equal(535);

    const events = (await failures()).slice(before);
    expect(events.map((e) => e.reason)).to.deep.equal(['client_certificate_required', 'client_certificate_untrusted', 'client_certificate_mismatch', 'bad_password']);
    expect(events[0].clientCertificateFingerprint256).to.equal(undefined);
    expect(events[2].clientCertificateFingerprint256).to.equal(new X509Certificate(sibling.cert).fingerprint256);
    expect(events.every((e) => e.motorBlockId === block.motorBlockId && e.username === block.smtpUsername)).to.equal(true);
  });

  it('a password block is not affected by a client certificate, and switching back to smtp_password drops the mTLS requirement', async () => {
    // Another block of a CA-configured Motor logs in with its password, with or without a certificate.
    const plain = await h.newBlock();
    const t = nodemailer.createTransport({
      host: '127.0.0.1', port: h.port, secure: false, requireTLS: true, auth: { user: plain.smtpUsername, pass: plain.smtpPassword },
      tls: { ca: [h.ca], servername: 'localhost', cert: foreign.cert, key: foreign.key },
    });
    const info = await t.sendMail({ envelope: { from: `app@${plain.domain}`, to: ['p@rcpt.test'] }, raw: rfc822({ from: `app@${plain.domain}`, to: 'p@rcpt.test' }) });
    t.close();
    expect(info.response).to.match(/^250 /);

    const m = await putJson(url('/smtp/auth-method'), { authMethod: 'smtp_password' }, auth(owner));
    expect(m.status).to.equal(200);
    const back = await send({ client: null }, 'password again');
    expect(back.response).to.match(/^250 /);
  });
});
