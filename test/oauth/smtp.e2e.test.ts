import { expect } from 'chai';
import nodemailer from 'nodemailer';
import { streamName } from '../../domain/eventStore';
import type { MessageAccepted, SmtpAuthFailed } from '../../domain/events';
import type { RegisteredClient } from '../../commands/oauth/clients';
import { eventually } from '../support/motor';
import { RawClient, rfc822, startSmtpHarness, transport, type SmtpHarness } from '../smtp/harness';
import { authorize, dashboardUser, exchange, newClient, oauthBlock, refresh } from './support';

/**
 * SMTP with OAuth 2.0 access tokens end to end: the authorization-code flow over HTTP, then
 * nodemailer's XOAUTH2 (and PLAIN/LOGIN with the token as password) → Motor's listener →
 * MessageAccepted → delivery worker → the loopback MX.
 */
describe('SMTP with OAuth 2.0 access tokens (e2e)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;
  let block: Awaited<ReturnType<SmtpHarness['newBlock']>>;
  let oauth: Awaited<ReturnType<typeof oauthBlock>>;
  let client: RegisteredClient;
  let user: Awaited<ReturnType<typeof dashboardUser>>;
  let tokens: { access_token: string; refresh_token: string; motor_block: { id: string; smtp_username: string } };

  const tokenFor = async (motorBlockId: string) => {
    const { code } = await authorize(h.motor, { client, dashboardToken: user.token, motorBlockId });
    const r = await exchange(h.motor, client, code);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body;
  };
  const xoauth2 = (o: { user: string; accessToken: string; secure?: boolean }) => nodemailer.createTransport({
    host: '127.0.0.1', port: o.secure ? h.securePort : h.port, secure: o.secure ?? false, requireTLS: !o.secure,
    auth: { type: 'OAuth2', user: o.user, accessToken: o.accessToken },
    tls: { ca: [h.ca], servername: 'localhost' }, connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 20_000,
  });
  const send = async (t: ReturnType<typeof transport>, subject: string) => {
    try {
      return await t.sendMail({ envelope: { from: `app@${block.domain}`, to: ['oauth@rcpt.test'] }, raw: rfc822({ from: `app@${block.domain}`, to: 'oauth@rcpt.test', subject }) });
    } finally {
      t.close();
    }
  };
  const authFailures = async (motorBlockId: string) => (await h.motor.rt.store.readStream(streamName('smtpAuth', motorBlockId))).map((e) => e.data as SmtpAuthFailed);

  before(async () => {
    // The token endpoint is limited per client IP, and every suite's Motor shares 127.0.0.1's counter.
    h = await startSmtpHarness({ env: { ANONYMOUS_REQUEST_LIMIT: '100000' } });
    block = await h.newBlock();
    oauth = await oauthBlock(h.motor, block, 'OAuth SMTP block');
    client = await newClient(h.motor, block.accountId);
    user = await dashboardUser(h.motor, block.accountId);
    tokens = await tokenFor(oauth.motorBlockId);
    expect(tokens.motor_block.smtp_username).to.equal(oauth.smtpUsername);
  });
  after(async () => {
    await h?.close();
  });

  it('nodemailer XOAUTH2 (STARTTLS): accepted as the oauth2 block and delivered to the MX', async () => {
    const info = await send(xoauth2({ user: tokens.motor_block.smtp_username, accessToken: tokens.access_token }), 'Via XOAUTH2');
    expect(info.response).to.match(/^250 2\.6\.0 /);
    const id = /queued as ([0-9a-f-]{36})/.exec(info.response)![1];
    const accepted = (await h.motor.rt.store.readStream(streamName('message', id)))[0].data as MessageAccepted;
    expect(accepted.motorBlockId).to.equal(oauth.motorBlockId);
    expect(accepted.source).to.equal('smtp');
    const received = await eventually(async () => h.mx.messages.find((m) => m.raw.toString().includes('Subject: Via XOAUTH2')), 20_000);
    expect(received.envelope.rcptTo).to.deep.equal(['oauth@rcpt.test']);
  });

  it('AUTH PLAIN (implicit TLS) and AUTH LOGIN with the access token as the password', async () => {
    for (const [method, secure] of [['PLAIN', true], ['LOGIN', false]] as const) {
      const info = await send(transport(h, { user: oauth.smtpUsername, pass: tokens.access_token, method, secure }), `token as password ${method}`);
      expect(info.response, method).to.match(/^250 /);
    }
  });

  it('raw AUTH XOAUTH2: advertised after TLS; 235 for the token; refused with 334 + error JSON then 535 otherwise', async () => {
    const c = await RawClient.connect(h.securePort, true, h.ca);
    await c.reply();
    const ehlo = await c.command('EHLO client.test');
    expect(ehlo).to.match(/AUTH PLAIN LOGIN XOAUTH2/);
    const bad = await c.command(`AUTH XOAUTH2 ${Buffer.from(`user=${oauth.smtpUsername}\x01auth=Bearer not-a-token\x01\x01`).toString('base64')}`);
    expect(bad).to.match(/^334 /);
    expect(JSON.parse(Buffer.from(bad!.slice(4), 'base64').toString())).to.deep.equal({ status: '401', schemes: 'bearer', scope: 'email.send' });
    expect(await c.command('')).to.match(/^535 /);
    const ok = await c.command(`AUTH XOAUTH2 ${Buffer.from(`user=${oauth.smtpUsername}\x01auth=Bearer ${tokens.access_token}\x01\x01`).toString('base64')}`);
    expect(ok).to.match(/^235 /);
    c.end();
  });

  it('the whole JSON token response is not a password; a random password is refused on an oauth2 block', async () => {
    for (const pass of [JSON.stringify(tokens), 'S3cretPassw0rdThatIsNotAToken']) {
      const err = await send(transport(h, { user: oauth.smtpUsername, pass }), 'nope').catch((e) => e);
      expect(err.responseCode, pass.slice(0, 20)).to.equal(535);
    }
    const events = await authFailures(oauth.motorBlockId);
    expect(events.filter((e) => e.reason === 'invalid_token').length).to.be.at.least(2);
  });

  it('a password-method block refuses tokens (XOAUTH2 and as password), even one bound to it', async () => {
    const own = await tokenFor(block.motorBlockId);
    const x = await send(xoauth2({ user: block.smtpUsername, accessToken: own.access_token }), 'nope').catch((e) => e);
    expect(x.responseCode).to.equal(535);
    const p = await send(transport(h, { user: block.smtpUsername, pass: own.access_token }), 'nope').catch((e) => e);
    expect(p.responseCode).to.equal(535);
    const events = await authFailures(block.motorBlockId);
    expect(events.map((e) => [e.mechanism, e.reason])).to.deep.include.members([['XOAUTH2', 'auth_method_mismatch'], ['PLAIN', 'bad_password']]);
    // Its own password still works.
    expect((await send(transport(h, { user: block.smtpUsername, pass: block.smtpPassword }), 'password still ok')).response).to.match(/^250 /);
  });

  it('a token of another block, and a token whose authorization was revoked (refresh reuse), are refused', async () => {
    const other = await oauthBlock(h.motor, block, 'Second OAuth block');
    const wrongBlock = await send(xoauth2({ user: other.smtpUsername, accessToken: tokens.access_token }), 'nope').catch((e) => e);
    expect(wrongBlock.responseCode).to.equal(535);

    const t = await tokenFor(oauth.motorBlockId);
    const rotated = await refresh(h.motor, client, t.refresh_token);
    expect(rotated.status).to.equal(200);
    expect((await send(xoauth2({ user: oauth.smtpUsername, accessToken: rotated.body.access_token }), 'rotated ok')).response).to.match(/^250 /);
    expect((await refresh(h.motor, client, t.refresh_token)).body.error).to.equal('invalid_grant');
    const revoked = await send(xoauth2({ user: oauth.smtpUsername, accessToken: rotated.body.access_token }), 'nope').catch((e) => e);
    expect(revoked.responseCode).to.equal(535);
  });
});
