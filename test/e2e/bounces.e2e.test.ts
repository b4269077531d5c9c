import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { streamName } from '../../domain/eventStore';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { bounceAddress, returnPathSettings } from '../../smtp/inbound/returnPath';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type ReceivedMessage, type SmtpSink } from '../support/smtpSink';
import { eventually, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { RawClient, testCertPaths } from '../smtp/harness';
import { startPausableProxy, type PausableProxy } from '../support/pausableProxy';
import { TEST_PG_ADMIN_URL } from '../support/db';

/** One SMTP transaction to the inbound listener; every reply, in order. */
async function submitTo(port: number, mailFrom: string, rcptTo: string, message: string | null): Promise<string[]> {
  const c = await RawClient.connect(port);
  const replies: string[] = [];
  try {
    replies.push((await c.reply())!);
    replies.push((await c.command('EHLO mx.rcpt.test'))!);
    replies.push((await c.command(`MAIL FROM:<${mailFrom}>`))!);
    const rcpt = (await c.command(`RCPT TO:<${rcptTo}>`))!;
    replies.push(rcpt);
    if (message !== null && rcpt.startsWith('250')) {
      replies.push((await c.command('DATA'))!);
      const body = message.replace(/\r?\n/g, '\r\n').replace(/^\./gm, '..');
      replies.push((await c.command(`${body}\r\n.`, 20_000))!);
    }
    await c.command('QUIT');
  } finally {
    c.end();
  }
  return replies;
}

/**
 * Asynchronous bounces and complaints end to end (docs/DELIVERY.md): with BOUNCE_DOMAIN set a
 * message goes out with MAIL FROM bounces+<token>@BOUNCE_DOMAIN; a DSN or an ARF report sent to
 * that address over SMTP, to the inbound listener, changes the recipient's outcome.
 */
describe('asynchronous bounces and complaints (e2e)', function () {
  this.timeout(60_000);
  const BOUNCE_DOMAIN = 'bounces.motor.test';
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let block: BootstrapResult;
  let senderDomain: string;
  let token: string;
  /** Webhook posts (message.bounced, message.complained) received on loopback. */
  const hooks: { event: string; data: Record<string, unknown> }[] = [];
  let receiver: Server;

  before(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        hooks.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      'mx.rcpt.test': { A: ['127.0.0.1'] },
    });
    mx = await startSmtpSink({});
    const cert = testCertPaths();
    motor = await startTestMotor({
      roles: ['api', 'projector', 'worker', 'inbound'],
      env: {
        DNS_SERVERS: dns.address, MX_PORT: String(mx.port), BOUNCE_DOMAIN, SMTP_TLS_CERT: cert.cert, SMTP_TLS_KEY: cert.key,
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      },
    });
    block = await motor.bootstrap({ trustDns: true });
    senderDomain = block.dnsRecords.find((r) => r.purpose === 'spf')!.name;
    for (const r of block.dnsRecords) dns.addRecords(r.name, { TXT: [r.value] });
    token = await motor.token(block, ['logs.read', 'logs.pii']);
    const manage = await motor.token(block, ['webhooks.manage']);
    const hook = await postJson(`${motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId}/webhooks`, {
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, events: ['message.bounced', 'message.complained'],
    }, { authorization: `Bearer ${manage}` });
    expect(hook.status, JSON.stringify(hook.body)).to.equal(201);
  });
  after(async () => {
    await motor?.close();
    await mx?.close();
    await dns?.close();
    receiver?.closeAllConnections();
    await new Promise((r) => receiver?.close(r));
  });

  /** Sends, waits until every recipient is terminal; the message id, the recipients and what the MX received. */
  async function sendDelivered(to: string[]): Promise<{ id: string; received: ReceivedMessage }> {
    const res = await postJson(`${motor.baseUrl}/v1/send`, { from: `app@${senderDomain}`, to, subject: 'Hello', text: 'Hi' }, { 'X-Api-Key': block.apiKey });
    expect(res.status).to.equal(200);
    const id = res.body.data.id as string;
    const r = await recipients(id, (rs) => rs.every((x) => x.outcome === 'delivered'));
    expect(r).to.have.length(to.length);
    const received = mx.messages.filter((m) => to.every((t) => m.envelope.rcptTo.includes(t)));
    expect(received, 'one transaction for the recipients of one domain').to.have.length(1);
    return { id, received: received[0] };
  }

  type Rcpt = { recipient: string; outcome: string; smtpCode: string | null; enhancedCode: string | null; smtpResponse: string | null; mx: string | null };
  async function recipients(id: string, until: (rs: Rcpt[]) => boolean): Promise<Rcpt[]> {
    return eventually(async () => {
      const x = await getJson(`${motor.baseUrl}/api/public/v1/messages/${id}/recipients?includePII=true`, { authorization: `Bearer ${token}` });
      return x.status === 200 && until(x.body.data.recipients) ? x.body.data.recipients as Rcpt[] : null;
    }, 20_000);
  }

  const inboundPort = () => motor.started.inbound!.port;

  const submit = (mailFrom: string, rcptTo: string, message: string | null) => submitTo(inboundPort(), mailFrom, rcptTo, message);

  const dsn = (o: { to: string; recipient: string; action?: string; status?: string; diagnostic?: string }) => [
    'From: Mail Delivery System <MAILER-DAEMON@mx.rcpt.test>', `To: <${o.to}>`, 'Subject: Undelivered Mail Returned to Sender',
    'MIME-Version: 1.0', 'Content-Type: multipart/report; report-type=delivery-status;', '\tboundary="B1"', '',
    '--B1', 'Content-Type: text/plain', '', 'I\'m sorry to have to inform you that your message could not be delivered.', '',
    '--B1', 'Content-Type: message/delivery-status', '',
    'Reporting-MTA: dns; mx.rcpt.test', '',
    `Final-Recipient: rfc822; ${o.recipient}`, `Original-Recipient: rfc822;${o.recipient}`, `Action: ${o.action ?? 'failed'}`,
    `Status: ${o.status ?? '5.1.1'}`, 'Remote-MTA: dns; mailbox.rcpt.test',
    `Diagnostic-Code: smtp; ${o.diagnostic ?? '550 5.1.1 <' + o.recipient + '>: Recipient address rejected:'}`, '    User unknown in virtual mailbox table', '',
    '--B1', 'Content-Type: text/rfc822-headers', '', `Return-Path: <${o.to}>`, 'Subject: Hello', '',
    '--B1--', '',
  ].join('\n');

  const arf = (o: { to: string; rcptTo?: string; returnPath?: string }) => [
    'From: <feedback@isp.test>', `To: <${o.to}>`, 'Subject: FW: Hello', 'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=feedback-report; boundary="F1"', '',
    '--F1', 'Content-Type: text/plain', '', 'This is an email abuse report.', '',
    '--F1', 'Content-Type: message/feedback-report', '',
    'Feedback-Type: abuse', 'User-Agent: ISP-FBL/1.0', 'Version: 1', ...(o.rcptTo ? [`Original-Rcpt-To: <${o.rcptTo}>`] : []), '',
    '--F1', 'Content-Type: message/rfc822', '', `Return-Path: <${o.returnPath ?? o.to}>`, `From: app@${senderDomain}`, 'Subject: Hello', '', 'Hi', '',
    '--F1--', '',
  ].join('\n');

  const streamOf = async (id: string) => motor.rt.store.readStream(streamName('message', id));

  it('sends with MAIL FROM bounces+<token>@BOUNCE_DOMAIN; a DSN for one recipient bounces it, the other stays delivered; the same DSN again adds nothing; message.bounced posted', async () => {
    const { id, received } = await sendDelivered(['one@rcpt.test', 'two@rcpt.test']);
    const expected = bounceAddress(id, returnPathSettings(BOUNCE_DOMAIN, motor.config.tokenSecret));
    expect(received.envelope.mailFrom).to.match(/^bounces\+[0-9a-f]{48}@bounces\.motor\.test$/);
    expect(received.envelope.mailFrom).to.equal(expected);

    const report = dsn({ to: received.envelope.mailFrom, recipient: 'one@rcpt.test' });
    const replies = await submit('', received.envelope.mailFrom, report);
    expect(replies.slice(2).map((r) => r.slice(0, 3))).to.deep.equal(['250', '250', '354', '250']);
    const rs = await recipients(id, (x) => x.some((r) => r.outcome === 'bounced'));
    const by = Object.fromEntries(rs.map((r) => [r.recipient, r]));
    expect(by['one@rcpt.test']).to.include({ outcome: 'bounced', smtpCode: '550', enhancedCode: '5.1.1', mx: 'mailbox.rcpt.test' });
    expect(by['one@rcpt.test'].smtpResponse).to.match(/^550 5\.1\.1 <one@rcpt\.test>: Recipient address rejected: User unknown/);
    expect(by['two@rcpt.test'].outcome).to.equal('delivered');
    const bounces = (await streamOf(id)).filter((e) => e.type === 'DeliveryBounced');
    expect(bounces).to.have.length(1);
    expect(bounces[0].data).to.include({ recipient: 'one@rcpt.test', asynchronous: true, smtpCode: '550' });

    // Delivered twice (the sender's retry after a lost 250, say): nothing new.
    const again = await submit('', received.envelope.mailFrom.toUpperCase(), report);
    expect(again[again.length - 1].slice(0, 3)).to.equal('250');
    expect((await streamOf(id)).filter((e) => e.type === 'DeliveryBounced')).to.have.length(1);

    const posted = await eventually(async () => hooks.find((h) => h.event === 'message.bounced' && h.data.messageId === id), 30_000);
    expect(posted.data).to.include({ recipient: 'one@rcpt.test', status: 'bounced', smtpCode: '550' });
  });

  it('an ARF report to the bounce address: complained, with its feedback type (Original-Rcpt-To redacted, one recipient), and message.complained posted', async () => {
    const { id, received } = await sendDelivered(['reader@rcpt.test']);
    const replies = await submit('feedback@isp.test', received.envelope.mailFrom, arf({ to: received.envelope.mailFrom }));
    expect(replies[replies.length - 1].slice(0, 3)).to.equal('250');
    const rs = await recipients(id, (x) => x[0].outcome === 'complained');
    expect(rs[0].recipient).to.equal('reader@rcpt.test');
    const complaints = (await streamOf(id)).filter((e) => e.type === 'ComplaintReceived');
    expect(complaints).to.have.length(1);
    expect(complaints[0].data).to.include({ recipient: 'reader@rcpt.test', feedbackType: 'abuse' });
    const posted = await eventually(async () => hooks.find((h) => h.event === 'message.complained' && h.data.messageId === id), 30_000);
    expect(posted.data).to.include({ recipient: 'reader@rcpt.test', status: 'complained', feedbackType: 'abuse' });
  });

  it('an ARF report to fbl@BOUNCE_DOMAIN finds the message through the token in the reported message\'s Return-Path', async () => {
    const { id, received } = await sendDelivered(['a@rcpt.test', 'b@rcpt.test']);
    const replies = await submit('feedback@isp.test', `fbl@${BOUNCE_DOMAIN}`, arf({ to: `fbl@${BOUNCE_DOMAIN}`, rcptTo: 'B@rcpt.test', returnPath: received.envelope.mailFrom }));
    expect(replies[replies.length - 1].slice(0, 3)).to.equal('250');
    const rs = await recipients(id, (x) => x.some((r) => r.outcome === 'complained'));
    expect(Object.fromEntries(rs.map((r) => [r.recipient, r.outcome]))).to.deep.equal({ 'a@rcpt.test': 'delivered', 'b@rcpt.test': 'complained' });
  });

  it('refuses a forged token and addresses outside the bounce addresses (550 5.1.1); a valid token of an unknown message is taken and ignored', async () => {
    const { received } = await sendDelivered(['forged@rcpt.test']);
    const forged = received.envelope.mailFrom.replace(/[0-9a-f](?=@)/, (c) => (c === 'a' ? 'b' : 'a'));
    for (const rcpt of [forged, `postmaster@${BOUNCE_DOMAIN}`, `bounces@${BOUNCE_DOMAIN}`, received.envelope.mailFrom.replace(BOUNCE_DOMAIN, 'elsewhere.test')]) {
      const replies = await submit('', rcpt, null);
      expect(replies[3], rcpt).to.match(/^550 5\.1\.1 /);
    }
    const unknown = randomUUID();
    const address = bounceAddress(unknown, returnPathSettings(BOUNCE_DOMAIN, motor.config.tokenSecret));
    const replies = await submit('', address, dsn({ to: address, recipient: 'x@rcpt.test' }));
    expect(replies[replies.length - 1].slice(0, 3)).to.equal('250');
    expect(await streamOf(unknown)).to.deep.equal([]);
  });

  it('a delayed DSN, a DSN for another address and an auto-reply: accepted, no event', async () => {
    const { id, received } = await sendDelivered(['quiet@rcpt.test']);
    const before = (await streamOf(id)).length;
    const delayed = dsn({ to: received.envelope.mailFrom, recipient: 'quiet@rcpt.test', action: 'delayed', status: '4.4.7', diagnostic: '451 4.4.7 try later' });
    const stranger = dsn({ to: received.envelope.mailFrom, recipient: 'stranger@rcpt.test' });
    const autoReply = [`From: quiet@rcpt.test`, `To: <${received.envelope.mailFrom}>`, 'Subject: Out of office', 'Auto-Submitted: auto-replied', '', 'I am away until Monday.', ''].join('\n');
    for (const m of [delayed, stranger, autoReply]) {
      const replies = await submit('', received.envelope.mailFrom, m);
      expect(replies[replies.length - 1].slice(0, 3)).to.equal('250');
    }
    expect((await streamOf(id)).length).to.equal(before);
    const rs = await recipients(id, () => true);
    expect(rs[0].outcome).to.equal('delivered');
  });

  it('counts reports by kind and result', async () => {
    const text = await motor.rt.metrics.registry.metrics();
    expect(text).to.match(/motor_inbound_reports_total\{kind="dsn",result="recorded"\} [1-9]/);
    expect(text).to.match(/motor_inbound_reports_total\{kind="none",result="refused_recipient"\} [1-9]/);
    expect(text).to.match(/motor_inbound_reports_total\{kind="other",result="ignored"\} [1-9]/);
  });
});

describe('asynchronous bounces: the store away (e2e)', function () {
  this.timeout(60_000);
  const BOUNCE_DOMAIN = 'bounces.motor.test';
  let proxy: PausableProxy;
  let motor: TestMotor;

  before(async () => {
    const target = new URL(TEST_PG_ADMIN_URL);
    proxy = await startPausableProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const cert = testCertPaths();
    motor = await startTestMotor({
      roles: ['inbound'], databasePort: proxy.port,
      env: { BOUNCE_DOMAIN, DATABASE_QUERY_TIMEOUT_MS: '1000', SMTP_TLS_CERT: cert.cert, SMTP_TLS_KEY: cert.key },
    });
  });
  after(async () => {
    proxy?.resume();
    await motor?.close();
    await proxy?.close();
  });

  it('answers 451 4.3.0 after DATA while the event store does not answer, and 250 once it does', async () => {
    const address = bounceAddress(randomUUID(), returnPathSettings(BOUNCE_DOMAIN, motor.config.tokenSecret));
    const report = ['From: <MAILER-DAEMON@mx.rcpt.test>', 'Content-Type: multipart/report; report-type=delivery-status; boundary="B"', '',
      '--B', 'Content-Type: message/delivery-status', '', 'Final-Recipient: rfc822; x@rcpt.test', 'Action: failed', 'Status: 5.1.1', '', '--B--', ''].join('\n');
    proxy.pause();
    const refused = await submitTo(motor.started.inbound!.port, '', address, report);
    expect(refused[refused.length - 1]).to.match(/^451 4\.3\.0 /);
    proxy.resume();
    const taken = await submitTo(motor.started.inbound!.port, '', address, report);
    expect(taken[taken.length - 1].slice(0, 3)).to.equal('250');
  });
});
