import { MAX_REPLY_TEXT } from '../../workers/delivery/smtpClient';
import { expect } from 'chai';
import { authenticate } from 'mailauth';
import { simpleParser } from 'mailparser';
import { streamName } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { newId } from '../../domain/ids';
import { generateApiKey } from '../../domain/credentials/apiKeys';
import { createResolver, mailauthResolver } from '../../workers/delivery/dns';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { awayFromMinuteEdge, eventually, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';

/**
 * The spine end to end: block from the CLI's bootstrap → POST /v1/send → the delivery worker finds
 * the recipient's MX through a DNS server on loopback → an SMTP server on loopback receives the
 * DKIM-signed mail → GET /messages/{id} shows the outcome.
 */
describe('send → deliver → outcome (e2e)', function () {
  this.timeout(60_000);
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let block: BootstrapResult;
  let senderDomain: string;

  const rcptScript = new Map<string, () => 250 | { code: number; message: string }>();

  before(async () => {
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      'mx.rcpt.test': { A: ['127.0.0.1'] },
    });
    mx = await startSmtpSink({ rcpt: (r) => (rcptScript.get(r.toLowerCase()) ?? (() => 250))() });
    motor = await startTestMotor({ env: { DNS_SERVERS: dns.address, MX_PORT: String(mx.port), DELIVERY_RETRY_SCHEDULE: '1,1,1' } });
    block = await motor.bootstrap({ trustDns: true });
    senderDomain = block.dnsRecords.find((r) => r.purpose === 'spf')!.name;
    for (const r of block.dnsRecords) dns.addRecords(r.name, { TXT: [r.value] });
  });
  after(async () => {
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  const send = (body: Record<string, unknown>, headers: Record<string, string> = {}, key = block.apiKey) =>
    postJson(`${motor.baseUrl}/v1/send`, body, { 'X-Api-Key': key, ...headers });
  const mail = (extra: Record<string, unknown> = {}) => ({ from: `app@${senderDomain}`, to: 'user@rcpt.test', subject: 'Hello', text: 'Hi there', ...extra });

  async function outcome(id: string, token: string, wanted: string) {
    return eventually(async () => {
      const r = await getJson(`${motor.baseUrl}/api/public/v1/messages/${id}`, { authorization: `Bearer ${token}` });
      return r.status === 200 && r.body.data.currentOutcome === wanted ? r.body.data : null;
    }, 20_000);
  }

  it('delivers a DKIM-signed message and reports delivered with the MX reply', async () => {
    const res = await send(mail({ fromName: 'Zoë Ops', headers: { 'X-Campaign': 'spring' } }));
    expect(res.status).to.equal(200);
    expect(res.body.success).to.equal(true);
    expect(res.body.data).to.have.keys(['id', 'acceptanceStatus', 'from', 'fromName', 'to', 'subject', 'timestamp']);
    expect(res.body.data.acceptanceStatus).to.equal('queued');
    expect(res.body.data.to).to.deep.equal(['user@rcpt.test']);
    expect(res.body).to.not.have.property('messageId');
    expect(res.body.data).to.not.have.property('status');
    expect(res.headers.get('ratelimit-limit')).to.equal(String(motor.config.defaultPlan.daily));
    expect(Number(res.headers.get('ratelimit-remaining'))).to.equal(motor.config.defaultPlan.daily - 1);
    expect(res.headers.get('x-ratelimit-limit')).to.equal(String(motor.config.apiRequestLimit));

    const token = await motor.token(block, ['logs.read']);
    // Readable at once: no 404 race with the projector.
    const immediate = await getJson(`${motor.baseUrl}/api/public/v1/messages/${res.body.data.id}`, { authorization: `Bearer ${token}` });
    expect(immediate.status).to.equal(200);
    expect(immediate.body.data.id).to.equal(res.body.data.id);

    const delivered = await outcome(res.body.data.id, token, 'delivered');
    expect(delivered.smtpCode).to.equal('250');
    expect(delivered.isTerminal).to.equal(true);
    expect(delivered.deliveredAt).to.be.a('string');
    expect(delivered.recipient).to.not.equal('user@rcpt.test');

    const received = mx.messages.find((m) => m.raw.toString().includes(res.body.data.id));
    expect(received, 'message reached the MX').to.not.equal(undefined);
    // Without BOUNCE_DOMAIN the envelope sender is the sender's own address (docs/DELIVERY.md "Asynchronous bounces and complaints").
    expect(received!.envelope.mailFrom).to.equal(`app@${senderDomain}`);
    const parsed = await simpleParser(received!.raw);
    expect(parsed.from?.value[0]).to.deep.include({ name: 'Zoë Ops', address: `app@${senderDomain}` });
    expect(parsed.headers.get('x-campaign')).to.equal('spring');
    expect(parsed.messageId).to.equal(`<${res.body.data.id}@${senderDomain}>`);

    const auth = await authenticate(received!.raw, {
      resolver: mailauthResolver(createResolver([dns.address])), sender: `app@${senderDomain}`, ip: '127.0.0.1', helo: 'localhost', trustReceived: false,
    });
    const sig = auth.dkim.results[0];
    expect(sig.status.result).to.equal('pass');
    expect(sig.signingDomain).to.equal(senderDomain);
    const signedHeaders = /\bh=([^;]+)/.exec(parsed.headers.get('dkim-signature') ? String((parsed.headerLines.find((l) => l.key === 'dkim-signature') ?? { line: '' }).line).replace(/\r?\n\s+/g, ' ') : '')?.[1] ?? '';
    expect(signedHeaders.toLowerCase().split(':').map((h) => h.trim())).to.include('x-campaign');

    const timeline = await getJson(`${motor.baseUrl}/api/public/v1/messages/${res.body.data.id}/events`, { authorization: `Bearer ${token}` });
    expect(timeline.body.data.events.map((e: { outcome: string }) => e.outcome)).to.deep.equal(['queued', 'processed', 'delivered']);
  });

  it('awkward but valid content arrives intact and DKIM-verifies: long and mixed-script subject, bare CR/LF, a 2 MB line, Unicode header values', async () => {
    const subject = `Ünïcødé 東京 Ελληνικά עברית 😀 ${'🚀'.repeat(150)} end`;
    const text = 'line one\rbare CR\nbare LF\r\nCRLF\n\n\u00a0nbsp, trailing spaces   \n.\n..leading dots\nFrom the start of a line';
    const html = `<p>${'x'.repeat(2 * 1024 * 1024)}</p>`;
    const res = await send(mail({ subject, text, html, fromName: 'Zoë "Quoted" O\'Brien \\ Ops', headers: { 'X-Note': 'naïve café — ✓', 'X-Empty-Ish': ' ' } }));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const token = await motor.token(block, ['logs.read']);
    await outcome(res.body.data.id, token, 'delivered');
    const received = mx.messages.find((m) => m.raw.toString().includes(res.body.data.id))!;
    const parsed = await simpleParser(received.raw);
    expect(parsed.subject).to.equal(subject);
    expect(parsed.from?.value[0]).to.deep.include({ name: 'Zoë "Quoted" O\'Brien \\ Ops', address: `app@${senderDomain}` });
    // Custom header values go out RFC 2047-encoded; mailparser decodes only the headers it knows.
    const decoded = async (value: unknown) => (await simpleParser(Buffer.from(`Subject: ${String(value)}\r\n\r\n`))).subject;
    expect(await decoded(parsed.headers.get('x-note'))).to.equal('naïve café — ✓');
    expect(parsed.html).to.equal(html);
    // Line ends become CRLF on the wire; the words and the dots at line starts survive.
    expect(parsed.text?.replace(/\r\n/g, '\n')).to.include('bare CR\nbare LF\nCRLF').and.include('\n.\n..leading dots\nFrom the start');
    const auth = await authenticate(received.raw, {
      resolver: mailauthResolver(createResolver([dns.address])), sender: `app@${senderDomain}`, ip: '127.0.0.1', helo: 'localhost', trustReceived: false,
    });
    expect(auth.dkim.results[0].status.result).to.equal('pass');
    // No line of the message is longer than RFC 5322's 998 characters.
    expect(Math.max(...received.raw.toString('latin1').split('\r\n').map((l) => l.length))).to.be.at.most(998);
  });

  it('a 4xx defers, and the retry delivers', async () => {
    let calls = 0;
    rcptScript.set('grey@rcpt.test', () => (++calls === 1 ? { code: 450, message: '4.2.0 Greylisted, try again' } : 250));
    const res = await send(mail({ to: 'grey@rcpt.test' }));
    expect(res.status).to.equal(200);
    const token = await motor.token(block, ['logs.read']);
    await outcome(res.body.data.id, token, 'delivered');
    const timeline = await getJson(`${motor.baseUrl}/api/public/v1/messages/${res.body.data.id}/events`, { authorization: `Bearer ${token}` });
    const outcomes = timeline.body.data.events.map((e: { outcome: string }) => e.outcome);
    expect(outcomes).to.deep.equal(['queued', 'processed', 'deferred', 'processed', 'delivered']);
    const deferred = timeline.body.data.events.find((e: { outcome: string }) => e.outcome === 'deferred');
    expect(deferred.smtpCode).to.equal('450');
    expect(deferred.smtpResponse).to.include('Greylisted');
  });

  it('a 5xx bounces with the code and response kept', async () => {
    rcptScript.set('gone@rcpt.test', () => ({ code: 550, message: '5.1.1 No such user' }));
    const res = await send(mail({ to: 'gone@rcpt.test' }));
    const token = await motor.token(block, ['logs.read']);
    const bounced = await outcome(res.body.data.id, token, 'bounced');
    expect(bounced.smtpCode).to.equal('550');
    expect(bounced.smtpResponse).to.include('No such user');
    expect(bounced.bouncedAt).to.be.a('string');
  });

  it('a reply of 200,000 characters still bounces, its text capped', async () => {
    rcptScript.set('huge@rcpt.test', () => ({ code: 550, message: `5.1.1 ${'x'.repeat(200_000)}` }));
    const token = await motor.token(block, ['logs.read']);
    const res = await send(mail({ to: 'huge@rcpt.test' }));
    const bounced = await outcome(res.body.data.id, token, 'bounced');
    expect(bounced.smtpCode).to.equal('550');
    expect(bounced.smtpResponse).to.match(/^550 5\.1\.1 x+$/);
    expect(bounced.smtpResponse.length).to.equal(MAX_REPLY_TEXT);
  });

  it('a multi-recipient send shows each recipient outcome on the recipients route', async () => {
    rcptScript.set('nobody@rcpt.test', () => ({ code: 550, message: '5.1.1 Unknown' }));
    const res = await send(mail({ to: ['one@rcpt.test', 'nobody@rcpt.test'] }));
    const token = await motor.token(block, ['logs.read', 'logs.pii']);
    const r = await eventually(async () => {
      const x = await getJson(`${motor.baseUrl}/api/public/v1/messages/${res.body.data.id}/recipients?includePII=true`, { authorization: `Bearer ${token}` });
      return x.status === 200 && x.body.data.allTerminal ? x.body.data : null;
    }, 20_000);
    expect(r.expectedCount).to.equal(2);
    expect(r.pii_masked).to.equal(false);
    const byAddr = Object.fromEntries(r.recipients.map((x: { recipient: string; outcome: string }) => [x.recipient, x.outcome]));
    expect(byAddr).to.deep.equal({ 'one@rcpt.test': 'delivered', 'nobody@rcpt.test': 'bounced' });
    const masked = await getJson(`${motor.baseUrl}/api/public/v1/messages/${res.body.data.id}/recipients`, { authorization: `Bearer ${token}` });
    expect(masked.body.data.pii_masked).to.equal(true);
    expect(masked.body.data.pii_unmask_path).to.include('includePII=true');
    expect(masked.body.data.recipients.map((x: { recipient: string }) => x.recipient)).to.not.include('one@rcpt.test');
  });

  describe('send errors (every row of the spec)', () => {
    it('401 Invalid API key format: missing, truncated, masked, unknown, and an account key', async () => {
      const bad = [undefined, block.apiKey.slice(0, -3), block.apiKey.replace(/_[^_]+$/, '_********'), generateApiKey('block').key, block.accountApiKey];
      for (const key of bad) {
        const res = await postJson(`${motor.baseUrl}/v1/send`, mail(), key ? { authorization: `ApiKey ${key}` } : {});
        expect(res.status, String(key)).to.equal(401);
        expect(res.body).to.deep.include({ success: false, error: 'Invalid API key format', code: 'invalid_api_key' });
        expect(res.headers.get('ratelimit-limit')).to.equal(null);
      }
    });

    it('403 From address domain does not match', async () => {
      const res = await send(mail({ from: 'app@elsewhere.test' }));
      expect(res.status).to.equal(403);
      expect(res.body).to.deep.include({ error: 'From address domain does not match', code: 'from_domain_mismatch' });
    });

    it('403 DOMAIN_DNS_INCOMPLETE when SPF/DKIM are not persisted as configured', async () => {
      const unverified = await motor.bootstrap({ trustDns: false });
      const domain = unverified.dnsRecords.find((r) => r.purpose === 'spf')!.name;
      const res = await send({ from: `app@${domain}`, to: 'user@rcpt.test', subject: 'x', text: 'y' }, {}, unverified.apiKey);
      expect(res.status).to.equal(403);
      expect(res.body).to.deep.include({ code: 'DOMAIN_DNS_INCOMPLETE', error: 'Domain DNS setup incomplete' });
      const dry = await send({ from: `app@${domain}`, to: 'user@rcpt.test', subject: 'x', text: 'y', dryRun: true }, {}, unverified.apiKey);
      expect(dry.status).to.equal(403);
    });

    it('422 Validation error for missing from, to, subject or body', async () => {
      for (const body of [mail({ from: undefined }), mail({ to: undefined }), mail({ subject: undefined }), mail({ text: undefined })]) {
        const res = await send(body);
        expect(res.status).to.equal(422);
        expect(res.body).to.deep.include({ success: false, error: 'Validation error', code: 'validation_error' });
      }
    });

    it('400 DISALLOWED_HEADERS for reserved names and CR/LF in values', async () => {
      for (const headers of [{ Bcc: 'x@y.z' }, { 'Content-Type': 'text/plain' }, { 'X-Service-Token': '1' }, { 'X-Ok': 'a\r\nBcc: evil@x.y' }]) {
        const res = await send(mail({ headers }));
        expect(res.status, JSON.stringify(headers)).to.equal(400);
        expect(res.body.code).to.equal('DISALLOWED_HEADERS');
      }
    });

    it('403 use_comms_api for a marketing block (error and code both)', async () => {
      const id = newId();
      const key = generateApiKey('block');
      const keyId = newId();
      const at = new Date().toISOString();
      const base = await motor.bootstrap();
      const rt = motor.rt;
      await rt.store.append(streamName('motorBlock', id), [toEventData(newId(), { type: 'MotorBlockCreated', data: {
        motorBlockId: id, accountId: base.accountId, name: 'news', type: 'marketing', domainId: base.domainId, smtpUsername: `mb_${id.slice(0, 8)}`, authMethod: 'api_key', createdAt: at,
      } })], { expectedRevision: 'no_stream' });
      await rt.store.append(streamName('apiKey', keyId), [toEventData(newId(), { type: 'ApiKeyCreated', data: {
        keyId, kind: 'block', accountId: base.accountId, motorBlockId: id, prefix: key.prefix, secretHash: key.secretHash, scopes: [], createdAt: at,
      } })], { expectedRevision: 'no_stream' });
      const domain = base.dnsRecords.find((r) => r.purpose === 'spf')!.name;
      const res = await eventually(async () => {
        const r = await send({ from: `app@${domain}`, to: 'user@rcpt.test', subject: 'x', text: 'y' }, {}, key.key);
        return r.status === 403 ? r : null;
      });
      expect(res.body).to.deep.equal({
        success: false, error: 'use_comms_api', code: 'use_comms_api', message: res.body.message, nextAction: res.body.nextAction,
      });
    });

    /** A new block with these limits, a send body from its domain, and a clock away from a UTC minute's edge (the burst counts per minute). */
    const limitedBlock = async (limits: { burst: number; hourly: number; daily: number }, to: string | string[] = 'user@rcpt.test') => {
      const limited = await motor.bootstrap();
      await motor.setLimits(limited.motorBlockId, limits);
      const domain = limited.dnsRecords.find((r) => r.purpose === 'spf')!.name;
      await awayFromMinuteEdge();
      return { limited, body: { from: `app@${domain}`, to, subject: 'x', text: 'y' } };
    };

    it('429 rate_limited_block with Retry-After, retryAfterSeconds and RateLimit-* of the binding dimension', async () => {
      // The burst counts per UTC minute: all three sends inside one (a CI run failed across the edge).
      const { limited, body } = await limitedBlock({ burst: 2, hourly: 100, daily: 1000 });
      expect((await send(body, {}, limited.apiKey)).status).to.equal(200);
      expect((await send(body, {}, limited.apiKey)).status).to.equal(200);
      const res = await send(body, {}, limited.apiKey);
      expect(res.status).to.equal(429);
      expect(res.body).to.deep.include({ success: false, error: 'rate_limited_block' });
      expect(res.body.retryAfterSeconds).to.be.within(1, 60);
      expect(res.headers.get('retry-after')).to.equal(String(res.body.retryAfterSeconds));
      expect(res.headers.get('ratelimit-limit')).to.equal('2');
      expect(res.headers.get('ratelimit-remaining')).to.equal('0');
      // dryRun is never charged, and validation failures come before the quota.
      expect((await send({ ...body, dryRun: true }, {}, limited.apiKey)).status).to.equal(200);
      expect((await send({ ...body, subject: '' }, {}, limited.apiKey)).status).to.equal(422);
    });

    it('429 names the binding dimension: with burst and hourly both full it is hourly (Retry-After to the next UTC hour), not burst', async () => {
      const { limited, body } = await limitedBlock({ burst: 2, hourly: 2, daily: 1000 });
      expect((await send(body, {}, limited.apiKey)).status).to.equal(200);
      expect((await send(body, {}, limited.apiKey)).status).to.equal(200);
      // Burst (2/2, resets within a minute) and hourly (2/2) both refuse: a retry after the burst's
      // reset would be refused again, so the answer is the hourly one.
      const res = await send(body, {}, limited.apiKey);
      const toNextHour = Math.ceil((Math.floor(Date.now() / 3_600_000 + 1) * 3_600_000 - Date.now()) / 1000);
      expect([res.status, res.body.code, res.body.dimension]).to.deep.equal([429, 'rate_limited_block', 'hourly']);
      expect(res.body.retryAfterSeconds).to.be.within(toNextHour - 2, toNextHour + 2);
      expect(res.body.message).to.contain('(hourly): 2/2');
      expect(res.body.message).to.contain(`Retry in ${res.body.retryAfterSeconds}s`);
      expect(res.headers.get('retry-after')).to.equal(String(res.body.retryAfterSeconds));
      expect(res.headers.get('ratelimit-limit')).to.equal('2');
      expect(res.headers.get('ratelimit-remaining')).to.equal('0');
      expect(res.headers.get('ratelimit-reset')).to.equal(String(res.body.retryAfterSeconds));
    });

    it('422 recipients_exceed_limit: more recipients than a block ceiling is a permanent refusal (no Retry-After), charged nothing, dryRun included', async () => {
      const to = ['a@rcpt.test', 'b@rcpt.test', 'c@rcpt.test', 'd@rcpt.test'];
      const { limited, body } = await limitedBlock({ burst: 3, hourly: 100, daily: 1000 }, to);
      const res = await send(body, {}, limited.apiKey);
      expect(res.status).to.equal(422);
      expect(res.body).to.deep.include({ success: false, error: 'recipients_exceed_limit', code: 'recipients_exceed_limit', dimension: 'burst', limit: 3, recipientCount: 4 });
      expect(res.body.nextAction).to.match(/at most 3 recipients/);
      expect(res.body).to.not.have.property('retryAfterSeconds');
      for (const h of ['retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) expect(res.headers.get(h), h).to.equal(null);
      // A dry run says so too; the checks before the quota still come first.
      expect((await send({ ...body, dryRun: true }, {}, limited.apiKey)).body.code).to.equal('recipients_exceed_limit');
      expect((await send({ ...body, subject: '' }, {}, limited.apiKey)).body.code).to.equal('validation_error');
      expect((await send({ ...body, from: 'app@other.test' }, {}, limited.apiKey)).status).to.equal(403);
      // Nothing was charged: three recipients still fit this minute's burst of 3.
      expect((await send({ ...body, to: to.slice(0, 3) }, {}, limited.apiKey)).status).to.equal(200);
    });

    it('dryRun validates everything, answers the dry-run shape, and creates nothing', async () => {
      const res = await send(mail({ dryRun: true, html: '<p>x</p>' }));
      expect(res.status).to.equal(200);
      expect(res.body.dryRun).to.equal(true);
      expect(res.body.data).to.deep.include({ status: 'validated', acceptanceStatus: 'validated', motorBlockId: block.motorBlockId, domain: senderDomain, hasText: true, hasHtml: true, recipientCount: 1 });
      expect(res.body.data).to.not.have.property('id');
      expect(res.headers.get('ratelimit-limit')).to.equal(null);
    });

    it('Idempotency-Key: a retry after the block was deactivated still returns the send that happened (a new key is refused)', async () => {
      const b = await motor.bootstrap({ trustDns: true });
      const domain = b.dnsRecords.find((r) => r.purpose === 'spf')!.name;
      const body = { from: `app@${domain}`, to: 'retry@rcpt.test', subject: 'Receipt', text: 'Thanks' };
      const key = `order-${newId()}`;
      const first = await send(body, { 'Idempotency-Key': key }, b.apiKey);
      expect(first.status).to.equal(200);
      const manage = await motor.token(b, ['config.manage']);
      const off = await postJson(`${motor.baseUrl}/api/public/v1/account/motor-blocks/${b.motorBlockId}/deactivate`, { confirm: true }, { authorization: `Bearer ${manage}` });
      expect(off.status, JSON.stringify(off.body)).to.equal(200);
      const retry = await send(body, { 'Idempotency-Key': key }, b.apiKey);
      expect([retry.status, retry.body.idempotent, retry.body.data?.id]).to.deep.equal([200, true, first.body.data.id]);
      const fresh = await send(body, { 'Idempotency-Key': `order-${newId()}` }, b.apiKey);
      expect([fresh.status, fresh.body.code]).to.deep.equal([403, 'motor_block_inactive']);
    });

    it('Idempotency-Key: 100 concurrent requests produce one message; replays say idempotent: true', async () => {
      const key = `order-${newId()}`;
      const results = await Promise.all(Array.from({ length: 100 }, () => send(mail({ to: 'idem@rcpt.test' }), { 'Idempotency-Key': key })));
      expect(results.every((r) => r.status === 200)).to.equal(true);
      const ids = new Set(results.map((r) => r.body.data.id));
      expect(ids.size).to.equal(1);
      expect(results.filter((r) => r.body.idempotent === true)).to.have.length(99);
      await eventually(async () => mx.messages.filter((m) => m.envelope.rcptTo.includes('idem@rcpt.test')).length === 1);
      await new Promise((r) => setTimeout(r, 500));
      expect(mx.messages.filter((m) => m.envelope.rcptTo.includes('idem@rcpt.test'))).to.have.length(1);
    });
  });
});
