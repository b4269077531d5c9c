import { expect } from 'chai';
import { authenticate as mailauth } from 'mailauth';
import { simpleParser } from 'mailparser';
import { streamName } from '../../domain/eventStore';
import type { MessageAccepted, SmtpAuthFailed, SmtpSubmissionRefused } from '../../domain/events';
import { toEventData } from '../../domain/events';
import { newId } from '../../domain/ids';
import { generateSmtpPassword } from '../../domain/credentials/apiKeys';
import { getBlock } from '../../projections/directory/queries';
import { createResolver, mailauthResolver } from '../../workers/delivery/dns';
import { awayFromMinuteEdge, eventually, getJson, postJson } from '../support/motor';
import { rawSession, rfc822, startSmtpHarness, transport, type SmtpHarness } from './harness';

const secondsToNextUtcHour = () => Math.ceil((Math.floor(Date.now() / 3_600_000 + 1) * 3_600_000 - Date.now()) / 1000);

/**
 * SMTP submission end to end with real clients: nodemailer (PLAIN and LOGIN, STARTTLS and
 * implicit TLS) → Motor's listener → MessageAccepted → delivery worker → the loopback MX, DKIM-signed.
 */
describe('SMTP submission (e2e)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;
  let block: Awaited<ReturnType<SmtpHarness['newBlock']>>;

  before(async () => {
    h = await startSmtpHarness();
    block = await h.newBlock();
  });
  after(async () => {
    await h?.close();
  });

  const queuedId = (response: string): string => /queued as ([0-9a-f-]{36})/.exec(response)![1];
  const accepted = async (id: string): Promise<MessageAccepted> => {
    const events = await h.motor.rt.store.readStream(streamName('message', id));
    return events[0].data as MessageAccepted;
  };

  it('STARTTLS + AUTH PLAIN: delivered to the MX DKIM-signed, Message-ID kept, owned headers replaced', async () => {
    const t = transport(h, { user: block.smtpUsername, pass: block.smtpPassword, method: 'PLAIN' });
    const info = await t.sendMail({
      envelope: { from: `app@${block.domain}`, to: ['user@rcpt.test'] },
      raw: rfc822({
        from: `"Zoë Ops" <app@${block.domain}>`, to: 'user@rcpt.test', subject: '=?UTF-8?Q?Gr=C3=BC=C3=9Fe?=', messageId: 'keep-me.1@client.example',
        extraHeaders: ['Bcc: hidden@elsewhere.test', 'X-Service-Tenant: spoofed', 'Received: from internal.lan', 'DKIM-Signature: v=1; forged', 'X-Campaign: spring'],
        body: 'Hello from SMTP ✓',
      }),
    });
    t.close();
    expect(info.response).to.match(/^250 2\.6\.0 /);
    const id = queuedId(info.response);

    const event = await accepted(id);
    expect(event.source).to.equal('smtp');
    expect(event.smtpMessageId).to.equal('keep-me.1@client.example');
    expect(event.subject).to.equal('Grüße');
    expect(event.fromName).to.equal('Zoë Ops');
    expect(event.to).to.deep.equal(['user@rcpt.test']);

    const received = await eventually(async () => h.mx.messages.find((m) => m.raw.toString().includes('keep-me.1@client.example')), 20_000);
    const parsed = await simpleParser(received.raw);
    expect(parsed.messageId).to.equal('<keep-me.1@client.example>');
    expect(parsed.text?.trim()).to.equal('Hello from SMTP ✓');
    expect(parsed.headers.get('x-campaign')).to.equal('spring');
    for (const owned of ['bcc', 'x-service-tenant', 'received']) expect(parsed.headers.has(owned), owned).to.equal(false);
    expect(received.raw.toString()).to.not.include('hidden@elsewhere.test');
    expect(received.envelope.mailFrom).to.equal(`app@${block.domain}`);

    const auth = await mailauth(received.raw, {
      resolver: mailauthResolver(createResolver([h.dns.address])), sender: `app@${block.domain}`, ip: '127.0.0.1', helo: 'localhost', trustReceived: false,
    });
    expect(auth.dkim.results).to.have.length(1);
    expect(auth.dkim.results[0].status.result).to.equal('pass');
    expect(auth.dkim.results[0].signingDomain).to.equal(block.domain);

    const token = await h.motor.token(block, ['logs.read']);
    const status = await eventually(async () => {
      const r = await getJson(`${h.motor.baseUrl}/api/public/v1/messages/${id}`, { authorization: `Bearer ${token}` });
      return r.status === 200 && r.body.data.currentOutcome === 'delivered' ? r.body.data : null;
    }, 20_000);
    expect(status.smtpMessageId).to.equal('keep-me.1@client.example');
  });

  it('a Subject or display name that decodes to U+0000 or is cut mid surrogate pair is cleaned, not refused', async () => {
    const t = transport(h, { user: block.smtpUsername, pass: block.smtpPassword, method: 'PLAIN' });
    // 997 ASCII characters then an emoji (a surrogate pair): the 998-unit cut falls between its halves.
    // Two encoded words on two lines: no line of the message may exceed 998 octets.
    const word = (s: string) => `=?UTF-8?B?${Buffer.from(s).toString('base64')}?=`;
    const long = `${word('a'.repeat(600))}\r\n ${word(`${'a'.repeat(397)}😀`)}`;
    const sends = await Promise.all([
      t.sendMail({ envelope: { from: `app@${block.domain}`, to: ['user@rcpt.test'] }, raw: rfc822({ from: `=?UTF-8?Q?Ops=00Team?= <app@${block.domain}>`, to: 'user@rcpt.test', subject: '=?UTF-8?Q?a=00b?=', body: 'x' }) }),
      t.sendMail({ envelope: { from: `app@${block.domain}`, to: ['user@rcpt.test'] }, raw: rfc822({ from: `app@${block.domain}`, to: 'user@rcpt.test', subject: long, body: 'x' }) }),
    ]);
    t.close();
    for (const info of sends) expect(info.response).to.match(/^250 2\.6\.0 /);
    const [nul, cut] = await Promise.all(sends.map((info) => accepted(queuedId(info.response))));
    expect(nul.subject).to.equal('ab');
    expect(nul.fromName).to.equal('OpsTeam');
    expect(cut.subject).to.equal('a'.repeat(997));
  });

  it('implicit TLS + AUTH LOGIN; a message without Message-ID gets <uuid>@<sending domain>', async () => {
    const t = transport(h, { user: block.smtpUsername, pass: block.smtpPassword, method: 'LOGIN', secure: true });
    const info = await t.sendMail({
      envelope: { from: `app@${block.domain}`, to: ['two@rcpt.test', 'three@rcpt.test'] },
      raw: rfc822({ from: `app@${block.domain}`, to: 'two@rcpt.test', messageId: null }),
    });
    t.close();
    expect(info.response).to.match(/^250 /);
    const event = await accepted(queuedId(info.response));
    expect(event.smtpMessageId).to.match(new RegExp(`^[0-9a-f-]{36}@${block.domain.replace(/\./g, '\\.')}$`));
    expect(event.to).to.deep.equal(['two@rcpt.test', 'three@rcpt.test']);
    expect(event.raw).to.include(`Message-ID: <${event.smtpMessageId}>`);
    expect(event.raw).to.match(/\r\nDate: /);
    const received = await eventually(async () => {
      const list = h.mx.messages.filter((m) => m.raw.toString().includes(event.smtpMessageId));
      return list.flatMap((m) => m.envelope.rcptTo).length === 2 ? list : null;
    }, 20_000);
    expect(received.flatMap((m) => m.envelope.rcptTo).sort()).to.deep.equal(['three@rcpt.test', 'two@rcpt.test']);
  });

  it('a MAIL FROM other than the From header (a bounce address in the domain) stays the delivery envelope sender', async () => {
    const t = transport(h, { user: block.smtpUsername, pass: block.smtpPassword });
    const info = await t.sendMail({
      envelope: { from: `bounces@${block.domain}`, to: ['envelope@rcpt.test'] },
      raw: rfc822({ from: `app@${block.domain}`, to: 'envelope@rcpt.test', messageId: 'envelope.1@client.example' }),
    });
    t.close();
    const event = await accepted(queuedId(info.response));
    expect(event.from).to.equal(`app@${block.domain}`);
    expect(event.envelopeFrom).to.equal(`bounces@${block.domain}`);
    const received = await eventually(async () => h.mx.messages.find((m) => m.raw.toString().includes('envelope.1@client.example')), 20_000);
    expect(received.envelope.mailFrom).to.equal(`bounces@${block.domain}`);
  });

  it('nodemailer composing the message (not raw) works too', async () => {
    const t = transport(h, { user: block.smtpUsername, pass: block.smtpPassword });
    const info = await t.sendMail({ from: `Ops <app@${block.domain}>`, to: 'composed@rcpt.test', subject: 'Composed', text: 'plain', html: '<p>html</p>' });
    t.close();
    expect(info.response).to.match(/^250 /);
    const event = await accepted(queuedId(info.response));
    expect(event.smtpMessageId).to.equal(info.messageId.replace(/[<>]/g, ''));
  });

  it('a wrong password is 535 5.7.8 and a SmtpAuthFailed event on the block stream; an unknown user goes to smtpAuth-unknown', async () => {
    const bad = transport(h, { user: block.smtpUsername, pass: 'not-the-password' });
    const err = await bad.sendMail({ from: `app@${block.domain}`, to: 'x@rcpt.test', subject: 's', text: 't' }).then(() => null, (e) => e);
    bad.close();
    expect(err?.responseCode).to.equal(535);
    expect(err.response).to.match(/^535 5\.7\.8 /);
    const failures = await h.motor.rt.store.readStream(streamName('smtpAuth', block.motorBlockId));
    const last = failures[failures.length - 1];
    expect(last.type).to.equal('SmtpAuthFailed');
    expect(last.data as SmtpAuthFailed).to.deep.include({ motorBlockId: block.motorBlockId, username: block.smtpUsername, reason: 'bad_password', mechanism: 'PLAIN', remoteAddress: '127.0.0.1' });

    const unknown = transport(h, { user: 'mb_nobody', pass: 'whatever' });
    const err2 = await unknown.sendMail({ from: `app@${block.domain}`, to: 'x@rcpt.test', subject: 's', text: 't' }).then(() => null, (e) => e);
    unknown.close();
    expect(err2?.responseCode).to.equal(535);
    const unk = await h.motor.rt.store.readStream(streamName('smtpAuth', 'unknown'));
    expect(unk.some((e) => (e.data as SmtpAuthFailed).username === 'mb_nobody' && (e.data as SmtpAuthFailed).reason === 'unknown_user')).to.equal(true);
  });

  it('a block whose method is API Key refuses SMTP AUTH even with the right password', async () => {
    const motorBlockId = newId();
    const smtpUsername = `mb_apikey${Date.now()}`;
    const pw = generateSmtpPassword();
    const at = new Date().toISOString();
    await h.motor.rt.store.append(streamName('motorBlock', motorBlockId), [
      toEventData(newId(), { type: 'MotorBlockCreated', data: { motorBlockId, accountId: block.accountId, name: 'api only', type: 'transactional', domainId: block.domainId, smtpUsername, authMethod: 'api_key', createdAt: at } }),
      toEventData(newId(), { type: 'SmtpPasswordSet', data: { motorBlockId, passwordHash: pw.passwordHash, setAt: at } }),
    ], { expectedRevision: 'no_stream' });
    await eventually(async () => (await getBlock(h.motor.rt.db, motorBlockId))?.smtpPasswordHash);

    const t = transport(h, { user: smtpUsername, pass: pw.password });
    const err = await t.sendMail({ from: `app@${block.domain}`, to: 'x@rcpt.test', subject: 's', text: 't' }).then(() => null, (e) => e);
    t.close();
    expect(err?.responseCode).to.equal(535);
    const failures = await h.motor.rt.store.readStream(streamName('smtpAuth', motorBlockId));
    expect((failures[0].data as SmtpAuthFailed).reason).to.equal('auth_method_mismatch');
  });

  it('sender rules: envelope sender outside the block domain is 553 5.7.1 at MAIL FROM; a From header outside it, at DATA', async () => {
    const t = transport(h, { user: block.smtpUsername, pass: block.smtpPassword });
    const env = await t.sendMail({ envelope: { from: 'app@other.test', to: ['x@rcpt.test'] }, raw: rfc822({ from: `app@${block.domain}`, to: 'x@rcpt.test' }) }).then(() => null, (e) => e);
    expect(env?.responseCode).to.equal(553);
    expect(env.response).to.match(/^553 5\.7\.1 /);
    const hdr = await t.sendMail({ envelope: { from: `app@${block.domain}`, to: ['x@rcpt.test'] }, raw: rfc822({ from: 'ceo@other.test', to: 'x@rcpt.test' }) }).then(() => null, (e) => e);
    t.close();
    expect(hdr?.responseCode).to.equal(553);
    const refused = await h.motor.rt.store.readStream(streamName('smtpSubmission', block.motorBlockId));
    expect(refused.map((e) => (e.data as SmtpSubmissionRefused).code)).to.include('from_domain_mismatch');
  });

  it('counts its sends in motor_sends_accepted_total and motor_sends_refused_total with source="smtp", a refusal at MAIL FROM or at DATA by its code', async () => {
    const count = async (name: string, labels: Record<string, string>): Promise<number> => {
      const metric = await h.motor.rt.metrics.registry.getSingleMetric(name)!.get();
      return metric.values.filter((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want)).reduce((n, v) => n + v.value, 0);
    };
    const read = async () => ({
      accepted: await count('motor_sends_accepted_total', { source: 'smtp' }),
      mismatch: await count('motor_sends_refused_total', { source: 'smtp', code: 'from_domain_mismatch' }),
      refused: await count('motor_sends_refused_total', { source: 'smtp' }),
      http: await count('motor_sends_accepted_total', { source: 'http' }),
    });
    const before = await read();
    const t = transport(h, { user: block.smtpUsername, pass: block.smtpPassword });
    try {
      await t.sendMail({ envelope: { from: `app@${block.domain}`, to: ['m@rcpt.test'] }, raw: rfc822({ from: `app@${block.domain}`, to: 'm@rcpt.test' }) });
      const atMail = await t.sendMail({ envelope: { from: 'app@other.test', to: ['m@rcpt.test'] }, raw: rfc822({ from: `app@${block.domain}`, to: 'm@rcpt.test' }) }).then(() => null, (e) => e);
      const atData = await t.sendMail({ envelope: { from: `app@${block.domain}`, to: ['m@rcpt.test'] }, raw: rfc822({ from: 'ceo@other.test', to: 'm@rcpt.test' }) }).then(() => null, (e) => e);
      expect([atMail?.command, atData?.command]).to.deep.equal(['MAIL FROM', 'DATA']);
    } finally {
      t.close();
    }
    const after = await read();
    expect(after.accepted - before.accepted).to.equal(1);
    expect(after.refused - before.refused).to.equal(2);
    expect(after.mismatch - before.mismatch, "both refusals are from_domain_mismatch").to.equal(2);
    expect(after.http).to.equal(before.http);
  });

  it('MAIL FROM refusals are MAIL replies (RFC 5321 4.3.2, RFC 3463): bad sender syntax 553 5.1.7, a sender the block may not use yet 550 5.7.1', async () => {
    const c = await rawSession(h, block);
    // smtp-server takes `localhost` as a domain; Motor's address rule (one label is no mail domain) does not.
    expect(await c.command('MAIL FROM:<app@localhost>')).to.match(/^553 5\.1\.7 /);
    expect(await c.command(`MAIL FROM:<app@${block.domain}>`)).to.match(/^250 /);
    c.end();

    // A block whose domain has no SPF and DKIM yet (DOMAIN_DNS_INCOMPLETE): a policy refusal of the sender, 550, not DATA's 554.
    const b = await h.motor.bootstrap({ trustDns: false });
    const domain = b.dnsRecords.find((r) => r.purpose === 'spf')!.name;
    const d = await rawSession(h, b);
    const refusal = await d.command(`MAIL FROM:<app@${domain}>`);
    d.end();
    expect(refusal).to.match(/^550 5\.7\.1 /);
    const refused = await eventually(async () => {
      const events = await h.motor.rt.store.readStream(streamName('smtpSubmission', b.motorBlockId));
      return events.length > 0 ? events : undefined;
    });
    expect(refused[0].data as SmtpSubmissionRefused).to.deep.include({ code: 'DOMAIN_DNS_INCOMPLETE', reply: refusal });
  });

  it('the null sender MAIL FROM:<> is 553 5.7.1, recorded as null_sender_not_allowed (no domain to mismatch)', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    const refusal = await c.command('MAIL FROM:<>');
    // The session goes on: a real sender is taken after it.
    expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
    c.end();
    expect(refusal).to.match(/^553 5\.7\.1 /);
    const refused = await eventually(async () => {
      const events = await h.motor.rt.store.readStream(streamName('smtpSubmission', b.motorBlockId));
      return events.length > 0 ? events : undefined;
    });
    expect(refused.map((e) => e.data as SmtpSubmissionRefused)).to.have.length(1);
    expect(refused[0].data as SmtpSubmissionRefused).to.deep.include({ code: 'null_sender_not_allowed', reply: refusal, envelopeFrom: '', recipientCount: 0 });
  });

  it('HTTP and SMTP draw on the same quota: the ceiling is hit at the same total, with the exact 451 text', async () => {
    const b = await h.newBlock();
    await h.motor.setLimits(b.motorBlockId, { burst: 4, hourly: 100, daily: 1000 });
    const http = () => postJson(`${h.motor.baseUrl}/v1/send`, { from: `app@${b.domain}`, to: 'q@rcpt.test', subject: 'q', text: 'q' }, { 'X-Api-Key': b.apiKey });
    const t = transport(h, { user: b.smtpUsername, pass: b.smtpPassword });
    const smtp = () => t.sendMail({ envelope: { from: `app@${b.domain}`, to: ['q@rcpt.test'] }, raw: rfc822({ from: `app@${b.domain}`, to: 'q@rcpt.test' }) }).then((i) => i.response, (e) => e.response as string);

    // The burst counts per UTC minute: all five sends inside one.
    await awayFromMinuteEdge(15);
    expect((await http()).status).to.equal(200);
    expect(await smtp()).to.match(/^250 /);
    expect((await http()).status).to.equal(200);
    expect(await smtp()).to.match(/^250 /);
    const over = await smtp();
    expect(over).to.match(/^451 4\.7\.1 Rate limit exceeded \(burst\): 4\/4\. Retry in \d+s\.$/);
    expect((await http()).status).to.equal(429);
    t.close();
    // The refusal is recorded after the reply, not before it (smtp/listener.ts `refuse`).
    const refused = await eventually(async () => {
      const events = await h.motor.rt.store.readStream(streamName('smtpSubmission', b.motorBlockId));
      return events.length > 0 ? events : undefined;
    });
    expect((refused[refused.length - 1].data as SmtpSubmissionRefused)).to.deep.include({ code: 'rate_limited_block', reply: over });
  });

  it('the 451 names the binding dimension: with burst and hourly both full it is hourly, retried at the next UTC hour', async () => {
    const b = await h.newBlock();
    await h.motor.setLimits(b.motorBlockId, { burst: 2, hourly: 2, daily: 1000 });
    const t = transport(h, { user: b.smtpUsername, pass: b.smtpPassword });
    const smtp = () => t.sendMail({ envelope: { from: `app@${b.domain}`, to: ['h@rcpt.test'] }, raw: rfc822({ from: `app@${b.domain}`, to: 'h@rcpt.test' }) }).then((i) => i.response, (e) => e.response as string);
    await awayFromMinuteEdge();
    expect(await smtp()).to.match(/^250 /);
    expect(await smtp()).to.match(/^250 /);
    const over = await smtp();
    t.close();
    const m = /^451 4\.7\.1 Rate limit exceeded \(hourly\): 2\/2\. Retry in (\d+)s\.$/.exec(over);
    expect(m, over).to.not.equal(null);
    expect(Number(m![1])).to.be.within(secondsToNextUtcHour() - 2, secondsToNextUtcHour() + 2);
  });

  it('more recipients than the smallest quota ceiling: RCPT TO past it is 452 4.5.3, and the transaction goes through with those accepted', async () => {
    const b = await h.newBlock();
    await h.motor.setLimits(b.motorBlockId, { burst: 2, hourly: 100, daily: 1000 });
    await awayFromMinuteEdge();
    const c = await rawSession(h, b);
    expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
    expect(await c.command('RCPT TO:<r1@rcpt.test>')).to.match(/^250 /);
    expect(await c.command('RCPT TO:<r2@rcpt.test>')).to.match(/^250 /);
    // A repeated address replaces its entry: not one more recipient.
    expect(await c.command('RCPT TO:<R1@rcpt.test>')).to.match(/^250 /);
    expect(await c.command('RCPT TO:<r3@rcpt.test>')).to.match(/^452 4\.5\.3 .*burst limit is 2/);
    expect(await c.command('DATA')).to.match(/^354 /);
    expect(await c.command(`${rfc822({ from: `app@${b.domain}`, to: 'r1@rcpt.test' })}.`)).to.match(/^250 /);
    // The client sends the rest in a later transaction (here a later minute's burst would take it).
    c.end();
  });

  it('a ceiling lowered after the RCPTs were accepted: DATA is refused for good, 552 5.5.3 recipients_exceed_limit, not a 451 retried for days', async () => {
    const b = await h.newBlock();
    await h.motor.setLimits(b.motorBlockId, { burst: 3, hourly: 100, daily: 1000 });
    const c = await rawSession(h, b);
    expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
    for (const r of ['s1', 's2', 's3']) expect(await c.command(`RCPT TO:<${r}@rcpt.test>`)).to.match(/^250 /);
    await h.motor.setLimits(b.motorBlockId, { burst: 2, hourly: 100, daily: 1000 });
    expect(await c.command('DATA')).to.match(/^354 /);
    const refusal = await c.command(`${rfc822({ from: `app@${b.domain}`, to: 's1@rcpt.test' })}.`);
    c.end();
    expect(refusal).to.match(/^552 5\.5\.3 /);
    const refused = await eventually(async () => {
      const events = await h.motor.rt.store.readStream(streamName('smtpSubmission', b.motorBlockId));
      return events.length > 0 ? events : undefined;
    });
    expect((refused[refused.length - 1].data as SmtpSubmissionRefused)).to.deep.include({ code: 'recipients_exceed_limit', recipientCount: 3, reply: refusal });
  });
});

describe('SMTP submission over the account-wide limit (e2e)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;
  before(async () => {
    h = await startSmtpHarness({ env: { ENFORCE_ACCOUNT_LIMIT: 'true', PLAN_DEFAULT_ACCOUNT_HOURLY: '2' } });
  });
  after(async () => {
    await h?.close();
  });

  it('replies 451 4.7.1 account-wide send limit exceeded (acct_hourly) with the numbers', async () => {
    const b = await h.newBlock();
    const t = transport(h, { user: b.smtpUsername, pass: b.smtpPassword, secure: true });
    const smtp = () => t.sendMail({ envelope: { from: `app@${b.domain}`, to: ['a@rcpt.test'] }, raw: rfc822({ from: `app@${b.domain}`, to: 'a@rcpt.test' }) }).then((i) => i.response, (e) => e.response as string);
    expect(await smtp()).to.match(/^250 /);
    expect(await smtp()).to.match(/^250 /);
    expect(await smtp()).to.match(/^451 4\.7\.1 account-wide send limit exceeded \(acct_hourly\): 2\/2\. Retry in \d+s\.$/);
    t.close();
  });

  it('RCPT TO past the account ceiling is 452 4.5.3 (the transaction could never be accepted whole)', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
    expect(await c.command('RCPT TO:<a1@rcpt.test>')).to.match(/^250 /);
    expect(await c.command('RCPT TO:<a2@rcpt.test>')).to.match(/^250 /);
    expect(await c.command('RCPT TO:<a3@rcpt.test>')).to.match(/^452 4\.5\.3 .*account-wide acct_hourly limit is 2/);
    c.end();
  });
});
