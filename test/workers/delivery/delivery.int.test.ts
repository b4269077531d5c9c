import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import { authenticate } from 'mailauth';
import { simpleParser } from 'mailparser';
import { startDnsServer, type TestDnsServer } from '../../support/dnsServer.js';
import { startSmtpSink, testCertificate, type SmtpSink, type SmtpSinkOptions } from '../../support/smtpSink.js';
import { startUnansweredListener } from '../../support/unansweredListener.js';
import { createResolver, mailauthResolver, type DnsResolver } from '../../../workers/delivery/dns.js';
import { generateDkimKey, signMessage, type DkimAlgorithm, type DkimKey } from '../../../workers/delivery/dkim.js';
import { buildMime } from '../../../workers/delivery/mime.js';
import { MAX_MX_HOSTS, deliverMessage, deliverToDomain, deliverViaRelay, type RecipientResult } from '../../../workers/delivery/smtpClient.js';

const timeouts = { connectMs: 2000, greetingMs: 2000, socketMs: 5000 };
const HOSTNAME = 'out.motor.test';
const SENDER_DOMAIN = 'sender.test';

describe('delivery end to end (loopback DNS + SMTP sink)', function () {
  this.timeout(20_000);

  let dns: TestDnsServer;
  let resolver: DnsResolver;
  /** Gives up on a silent server after 300 ms: only for the test of that case (a busy machine can take longer to answer). */
  let impatientResolver: DnsResolver;
  const keys = {} as Record<DkimAlgorithm, DkimKey>;
  const sinks: SmtpSink[] = [];
  const sink = async (opts?: SmtpSinkOptions): Promise<SmtpSink> => {
    const s = await startSmtpSink(opts);
    sinks.push(s);
    return s;
  };

  before(async () => {
    keys['rsa-sha256'] = await generateDkimKey('rsa-sha256');
    keys['ed25519-sha256'] = await generateDkimKey('ed25519-sha256');
    dns = await startDnsServer({
      'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
      'mx.rcpt.test': { A: ['127.0.0.1'] },
      'other.test': { MX: [{ exchange: 'mx.other.test', priority: 5 }] },
      'mx.other.test': { A: ['127.0.0.1'] },
      'bare.test': { A: ['127.0.0.1'] },
      // bücher.test, as DNS knows it (RFC 5890 A-labels).
      'xn--bcher-kva.test': { MX: [{ exchange: 'mx.xn--bcher-kva.test', priority: 10 }] },
      'mx.xn--bcher-kva.test': { A: ['127.0.0.1'] },
      'nullmx.test': { MX: [{ exchange: '.', priority: 0 }] },
      'failover.test': {
        MX: [
          { exchange: 'down.failover.test', priority: 10 },
          { exchange: 'up.failover.test', priority: 20 },
        ],
      },
      // 127.0.0.2 is loopback too, but nothing listens there: connection refused.
      'down.failover.test': { A: ['127.0.0.2'] },
      'up.failover.test': { A: ['127.0.0.1'] },
      'alldown.test': { MX: [{ exchange: 'down.failover.test', priority: 10 }] },
      // Refused at down.failover.test, then whatever the test's raw server on 127.0.0.1 does.
      'twomx.test': {
        MX: [
          { exchange: 'down.failover.test', priority: 10 },
          { exchange: 'up.twomx.test', priority: 20 },
        ],
      },
      'up.twomx.test': { A: ['127.0.0.1'] },
      // One MX host, two addresses: refused at 127.0.0.2, then the test's raw server on 127.0.0.1.
      'twoaddr.test': { MX: [{ exchange: 'mx.twoaddr.test', priority: 10 }] },
      'mx.twoaddr.test': { A: ['127.0.0.2', '127.0.0.1'] },
      'ghostmx.test': { MX: [{ exchange: 'ghost.ghostmx.test', priority: 10 }] },
      // Its MX port is one where the TCP handshake never completes (test/support/unansweredListener.ts).
      'unanswered.test': { MX: [{ exchange: 'mx.unanswered.test', priority: 10 }] },
      'mx.unanswered.test': { A: ['127.0.0.1'] },
      'relay.test': { A: ['127.0.0.1'] },
      // A relay name with two addresses (the test certificate names it): refused at 127.0.0.2, then whatever listens on 127.0.0.1.
      'smtp.test': { A: ['127.0.0.2', '127.0.0.1'] },
      'rsa._domainkey.sender.test': { TXT: [keys['rsa-sha256'].dnsTxtValue] },
      'ed._domainkey.sender.test': { TXT: [keys['ed25519-sha256'].dnsTxtValue] },
    });
    resolver = createResolver([dns.address], { timeoutMs: 5000, tries: 1 });
    impatientResolver = createResolver([dns.address], { timeoutMs: 300, tries: 1 });
  });
  after(() => dns.close());
  afterEach(async () => {
    await Promise.all(sinks.splice(0).map((s) => s.close()));
  });

  async function signedMessage(opts: { to: string[]; algorithm?: DkimAlgorithm; fromName?: string | null; headers?: Record<string, string> }): Promise<Buffer> {
    const algorithm = opts.algorithm ?? 'rsa-sha256';
    const raw = await buildMime({
      from: `news@${SENDER_DOMAIN}`,
      fromName: opts.fromName ?? null,
      to: opts.to,
      subject: 'Your receipt',
      text: 'Thanks for your order.',
      html: '<p>Thanks for your order.</p>',
      headers: opts.headers ?? {},
      messageId: `m-${Date.now()}@${SENDER_DOMAIN}`,
      date: new Date(),
    });
    return signMessage(raw, {
      domain: SENDER_DOMAIN,
      selector: algorithm === 'rsa-sha256' ? 'rsa' : 'ed',
      privateKeyPem: keys[algorithm].privateKeyPem,
      algorithm,
    });
  }

  const deliver = (s: SmtpSink, raw: Buffer, recipients: string[], via: DnsResolver = resolver): Promise<RecipientResult[]> =>
    deliverMessage({ raw, envelopeFrom: `bounces@${SENDER_DOMAIN}`, recipients, resolver: via, mxPort: s.port, allowPrivateAddresses: true, hostname: HOSTNAME, timeouts });

  const byRecipient = (results: RecipientResult[]) => Object.fromEntries(results.map((r) => [r.recipient, r]));

  for (const algorithm of ['rsa-sha256', 'ed25519-sha256'] as DkimAlgorithm[]) {
    it(`delivers to two recipients of one domain over ONE connection, and the ${algorithm} DKIM signature verifies as pass`, async () => {
      const s = await sink();
      const raw = await signedMessage({ to: ['alice@rcpt.test', 'bob@rcpt.test'], algorithm });
      const results = await deliver(s, raw, ['alice@rcpt.test', 'bob@rcpt.test']);

      expect(results).to.have.length(2);
      for (const r of results) {
        expect(r).to.include({ outcome: 'delivered', smtpCode: '250', mx: 'mx.rcpt.test', detail: null });
        expect(r.smtpResponse).to.match(/^250 /);
      }
      expect(s.connections).to.equal(1);
      const [received] = await s.waitFor(1);
      expect(s.messages).to.have.length(1);
      expect(received.envelope).to.deep.equal({ mailFrom: `bounces@${SENDER_DOMAIN}`, rcptTo: ['alice@rcpt.test', 'bob@rcpt.test'] });
      expect(received.heloName).to.equal(HOSTNAME);

      const auth = await authenticate(received.raw, {
        ip: '127.0.0.1',
        helo: HOSTNAME,
        sender: `bounces@${SENDER_DOMAIN}`,
        mta: 'mx.rcpt.test',
        resolver: mailauthResolver(resolver),
        disableArc: true,
        disableBimi: true,
      });
      expect(auth.dkim.results).to.have.length(1);
      expect(auth.dkim.results[0].status.result).to.equal('pass');
      expect(auth.dkim.results[0].signingDomain).to.equal(SENDER_DOMAIN);
      expect(auth.dkim.results[0].info).to.include(`header.a=${algorithm}`);
    });
  }

  it('sends a non-ASCII display name as an RFC 2047 From, and custom headers arrive covered by the signature', async () => {
    const s = await sink();
    const raw = await signedMessage({
      to: ['alice@rcpt.test'],
      algorithm: 'ed25519-sha256',
      fromName: 'Zoë Ångström',
      headers: { 'X-Order-Id': 'A-1001', 'List-Unsubscribe': '<https://sender.test/u/1>' },
    });
    await deliver(s, raw, ['alice@rcpt.test']);
    const [received] = await s.waitFor(1);
    const text = received.raw.toString('utf8');

    expect(text).to.match(/^From: =\?UTF-8\?[QB]\?.+\?= <news@sender\.test>$/m);
    const parsed = await simpleParser(received.raw);
    expect(parsed.from?.value[0]).to.deep.include({ name: 'Zoë Ångström', address: 'news@sender.test' });
    expect(text).to.match(/^X-Order-Id: A-1001$/m);
    expect(text).to.match(/^List-Unsubscribe: <https:\/\/sender\.test\/u\/1>$/m);

    const signature = text.split(/\r\n(?=\S)/).find((l) => l.startsWith('DKIM-Signature:'))!.replace(/\r\n\s+/g, ' ');
    const h = /\bh=([^;]+)/.exec(signature)![1].split(':').map((x) => x.trim().toLowerCase());
    expect(h).to.include.members(['from', 'x-order-id', 'list-unsubscribe']);

    const auth = await authenticate(received.raw, { ip: '127.0.0.1', helo: HOSTNAME, sender: `bounces@${SENDER_DOMAIN}`, resolver: mailauthResolver(resolver), disableArc: true, disableBimi: true });
    expect(auth.dkim.results[0].status.result).to.equal('pass');
  });

  it('declares BODY=8BITMIME for a message with 8-bit bytes only (the MX offers 8BITMIME)', async () => {
    const s = await sink();
    const message = (body: string) => Buffer.from(
      `From: news@${SENDER_DOMAIN}\r\nTo: alice@rcpt.test\r\nSubject: hi\r\nMIME-Version: 1.0\r\n` +
      `Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n${body}\r\n`, 'utf8');
    await deliver(s, message('plain ASCII '.repeat(300)), ['alice@rcpt.test']);
    // The one 8-bit byte sits at the very end of a long message.
    await deliver(s, message(`${'plain ASCII '.repeat(300)}Grüße`), ['alice@rcpt.test']);
    const [ascii, eightBit] = await s.waitFor(2);
    expect(ascii.mailFromArgs).not.to.have.property('BODY');
    expect(eightBit.mailFromArgs).to.include({ BODY: '8BITMIME' });
    expect(eightBit.raw.toString('utf8')).to.include('Grüße');
  });

  it('uses STARTTLS when the MX offers it, and delivers in plain text when it does not', async () => {
    const tls = await sink({ starttls: true });
    await deliver(tls, await signedMessage({ to: ['alice@rcpt.test'] }), ['alice@rcpt.test']);
    expect((await tls.waitFor(1))[0].secure).to.equal(true);

    const plain = await sink({ starttls: false });
    const results = await deliver(plain, await signedMessage({ to: ['alice@rcpt.test'] }), ['alice@rcpt.test']);
    expect(results[0].outcome).to.equal('delivered');
    expect((await plain.waitFor(1))[0].secure).to.equal(false);
  });

  it('retries in plain text, on a new connection, when the STARTTLS handshake fails', async () => {
    const s = await sink({ brokenStarttls: true });
    const [r] = await deliver(s, await signedMessage({ to: ['alice@rcpt.test'] }), ['alice@rcpt.test']);
    expect(r).to.include({ outcome: 'delivered', smtpCode: '250' });
    expect(s.connections).to.equal(2);
    expect((await s.waitFor(1))[0].secure).to.equal(false);
  });

  it('defers on a 4xx RCPT reply, keeping the code and the response', async () => {
    const s = await sink({ rcpt: () => ({ code: 450, message: '4.2.0 Greylisted, come back later' }) });
    const [r] = await deliver(s, await signedMessage({ to: ['alice@rcpt.test'] }), ['alice@rcpt.test']);
    expect(r).to.deep.equal({
      recipient: 'alice@rcpt.test',
      outcome: 'deferred',
      smtpCode: '450',
      enhancedCode: '4.2.0',
      smtpResponse: '450 4.2.0 Greylisted, come back later',
      mx: 'mx.rcpt.test',
      detail: null,
    });
    expect(s.messages).to.have.length(0);
  });

  it('bounces on a 5xx RCPT reply', async () => {
    const s = await sink({ rcpt: () => ({ code: 550, message: '5.1.1 No such user' }) });
    const [r] = await deliver(s, await signedMessage({ to: ['ghost@rcpt.test'] }), ['ghost@rcpt.test']);
    expect(r).to.include({ outcome: 'bounced', smtpCode: '550', enhancedCode: '5.1.1', smtpResponse: '550 5.1.1 No such user' });
    expect(s.messages).to.have.length(0);
  });

  it('keeps per-recipient replies apart: one accepted, one deferred, one bounced, in one session', async () => {
    const s = await sink({
      rcpt: (r) => (r.startsWith('later@') ? { code: 451, message: '4.7.1 Try again' } : r.startsWith('gone@') ? { code: 550, message: '5.1.1 Unknown' } : 250),
    });
    const recipients = ['ok@rcpt.test', 'later@rcpt.test', 'gone@rcpt.test'];
    const results = byRecipient(await deliver(s, await signedMessage({ to: recipients }), recipients));
    expect(results['ok@rcpt.test']).to.include({ outcome: 'delivered', smtpCode: '250' });
    expect(results['later@rcpt.test']).to.include({ outcome: 'deferred', smtpCode: '451', enhancedCode: '4.7.1' });
    expect(results['gone@rcpt.test']).to.include({ outcome: 'bounced', smtpCode: '550', enhancedCode: '5.1.1' });
    expect(s.connections).to.equal(1);
    expect(s.rcptAttempts).to.deep.equal(recipients);
    const [received] = await s.waitFor(1);
    expect(received.envelope.rcptTo).to.deep.equal(['ok@rcpt.test']);
  });

  it('applies a refusal after DATA to every accepted recipient (5xx bounced, 4xx deferred), keeping RCPT refusals', async () => {
    const hard = await sink({ rcpt: (r) => (r.startsWith('gone@') ? { code: 550, message: '5.1.1 Unknown' } : 250), data: () => ({ code: 554, message: '5.7.1 Message rejected as spam' }) });
    const results = byRecipient(await deliver(hard, await signedMessage({ to: ['a@rcpt.test'] }), ['a@rcpt.test', 'b@rcpt.test', 'gone@rcpt.test']));
    expect(results['a@rcpt.test']).to.include({ outcome: 'bounced', smtpCode: '554', enhancedCode: '5.7.1' });
    expect(results['b@rcpt.test']).to.include({ outcome: 'bounced', smtpCode: '554' });
    expect(results['gone@rcpt.test']).to.include({ outcome: 'bounced', smtpCode: '550' });

    const soft = await sink({ data: () => ({ code: 451, message: '4.3.0 Local error, try later' }) });
    const [r] = await deliver(soft, await signedMessage({ to: ['a@rcpt.test'] }), ['a@rcpt.test']);
    expect(r).to.include({ outcome: 'deferred', smtpCode: '451', enhancedCode: '4.3.0' });
  });

  it('bounces every recipient when MAIL FROM is refused', async () => {
    const s = await sink({ mailFrom: () => ({ code: 553, message: '5.7.1 Sender not allowed' }) });
    const results = await deliver(s, await signedMessage({ to: ['a@rcpt.test'] }), ['a@rcpt.test', 'b@rcpt.test']);
    expect(results.map((r) => [r.outcome, r.smtpCode])).to.deep.equal([
      ['bounced', '553'],
      ['bounced', '553'],
    ]);
  });

  it('delivers to the domain itself when it has no MX but an A record', async () => {
    const s = await sink();
    const [r] = await deliver(s, await signedMessage({ to: ['x@bare.test'] }), ['x@bare.test']);
    expect(r).to.include({ outcome: 'delivered', mx: 'bare.test' });
    expect((await s.waitFor(1))[0].envelope.rcptTo).to.deep.equal(['x@bare.test']);
  });

  it('fails permanently, without connecting, for a null MX, a nonexistent domain or MX hosts without address', async () => {
    const s = await sink();
    const results = byRecipient(await deliver(s, await signedMessage({ to: ['x@nullmx.test'] }), ['x@nullmx.test', 'y@nowhere.test', 'z@ghostmx.test']));
    expect(results['x@nullmx.test']).to.include({ outcome: 'failed', smtpCode: null, smtpResponse: null, mx: null });
    expect(results['x@nullmx.test'].detail).to.match(/null MX/);
    expect(results['y@nowhere.test']).to.include({ outcome: 'failed', mx: null });
    expect(results['y@nowhere.test'].detail).to.match(/does not exist/);
    expect(results['z@ghostmx.test']).to.include({ outcome: 'failed', mx: 'ghost.ghostmx.test' });
    expect(s.connections).to.equal(0);
  });

  it(`looks at no more than ${MAX_MX_HOSTS} MX hosts per attempt, however many the domain publishes`, async () => {
    const s = await sink();
    dns.setRecords('manymx.test', { MX: Array.from({ length: 200 }, (_, i) => ({ exchange: `h${i}.manymx.test`, priority: i })) });
    const before = dns.queries.length;
    const [result] = await deliver(s, await signedMessage({ to: ['x@manymx.test'] }), ['x@manymx.test']);
    const lookedUp = new Set(dns.queries.slice(before).filter((q) => q.name.endsWith('.manymx.test') && q.name !== 'manymx.test').map((q) => q.name));
    expect(lookedUp.size).to.equal(MAX_MX_HOSTS);
    expect(result).to.include({ outcome: 'failed', mx: `h${MAX_MX_HOSTS - 1}.manymx.test` });
    expect(s.connections).to.equal(0);
  });

  it('defers when DNS fails temporarily (SERVFAIL, no answer)', async () => {
    const s = await sink();
    dns.setFailure('sick.test', 'servfail');
    dns.setFailure('silent.test', 'timeout');
    const results = byRecipient(await deliver(s, await signedMessage({ to: ['a@sick.test'] }), ['a@sick.test', 'b@silent.test'], impatientResolver));
    expect(results['a@sick.test']).to.include({ outcome: 'deferred', smtpCode: null, mx: null });
    expect(results['a@sick.test'].detail).to.match(/ESERVFAIL/);
    expect(results['b@silent.test']).to.include({ outcome: 'deferred', smtpCode: null });
    expect(results['b@silent.test'].detail).to.match(/ETIMEOUT/);
    expect(s.connections).to.equal(0);
  });

  it('moves on to the next MX when the preferred one cannot be reached', async () => {
    const s = await sink();
    const [r] = await deliver(s, await signedMessage({ to: ['a@failover.test'] }), ['a@failover.test']);
    expect(r).to.include({ outcome: 'delivered', mx: 'up.failover.test' });
    expect(s.connections).to.equal(1);
  });

  it('defers with the connection error when no MX can be reached', async () => {
    const s = await sink();
    const [r] = await deliver(s, await signedMessage({ to: ['a@alldown.test'] }), ['a@alldown.test']);
    // One host: its own failure, without a prefix or its name (as the docs show it).
    expect(r).to.include({ outcome: 'deferred', smtpCode: null, smtpResponse: null, mx: 'down.failover.test', detail: `ESOCKET: connect ECONNREFUSED 127.0.0.2:${s.port}` });
  });

  /** Delivers to a@<domain> (rcpt.test by default) with its MX on 127.0.0.1 answered by a raw TCP server of the test's making. */
  const deliverToRawMx = async (onConnection: (socket: Socket) => void, t: typeof timeouts, signal?: AbortSignal, domain = 'rcpt.test'): Promise<RecipientResult> => {
    const sockets: Socket[] = [];
    const server: Server = createServer((socket) => {
      sockets.push(socket);
      onConnection(socket);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const [r] = await deliverToDomain({
        domain,
        recipients: [`a@${domain}`],
        raw: await signedMessage({ to: [`a@${domain}`] }),
        envelopeFrom: `bounces@${SENDER_DOMAIN}`,
        resolver,
        mxPort: (server.address() as AddressInfo).port,
        allowPrivateAddresses: true,
        hostname: HOSTNAME,
        timeouts: t,
        signal,
      });
      return r;
    } finally {
      sockets.forEach((sk) => sk.destroy());
      await new Promise((resolve) => server.close(resolve));
    }
  };

  it('defers after connectMs when the MX never completes the TCP handshake (connect timeout)', async () => {
    const mx = await startUnansweredListener();
    try {
      const recipients = ['a@unanswered.test', 'b@unanswered.test'];
      const started = Date.now();
      const results = await deliverToDomain({
        domain: 'unanswered.test', recipients, raw: await signedMessage({ to: recipients }), envelopeFrom: `bounces@${SENDER_DOMAIN}`,
        resolver, mxPort: mx.port, allowPrivateAddresses: true, hostname: HOSTNAME,
        // The greeting and reply timeouts are far longer: only the connect timeout can end this.
        timeouts: { connectMs: 600, greetingMs: 15_000, socketMs: 15_000 },
      });
      const waited = Date.now() - started;
      expect(waited, 'gave up at the connect timeout').to.be.at.least(590).and.below(3000);
      expect(results.map((r) => r.recipient)).to.deep.equal(recipients);
      for (const r of results) {
        expect(r).to.include({ outcome: 'deferred', smtpCode: null, enhancedCode: null, smtpResponse: null, mx: 'mx.unanswered.test' });
        expect(r.detail).to.equal(`ETIMEDOUT: Connection timeout: 127.0.0.1:${mx.port} did not answer within 600 ms`);
      }
    } finally {
      await mx.close();
    }
  });

  it('defers when the MX accepts the connection but never greets (greeting timeout)', async () => {
    const started = Date.now();
    const r = await deliverToRawMx(() => undefined, { connectMs: 1000, greetingMs: 300, socketMs: 1000 });
    expect(r).to.include({ outcome: 'deferred', smtpCode: null, mx: 'mx.rcpt.test' });
    expect(r.detail).to.match(/ETIMEDOUT|timeout/i);
    expect(Date.now() - started).to.be.below(5000);
  });

  it('waits the configured greeting timeout, not what is left of the connect timeout', async () => {
    const started = Date.now();
    const r = await deliverToRawMx(() => undefined, { connectMs: 300, greetingMs: 1500, socketMs: 5000 });
    const waited = Date.now() - started;
    expect(r).to.include({ outcome: 'deferred', smtpCode: null, mx: 'mx.rcpt.test' });
    expect(r.detail).to.match(/Greeting never received/);
    expect(waited, 'gave up after the greeting timeout').to.be.at.least(1400).and.below(4000);
  });

  /**
   * A scripted MX: greets, answers EHLO, MAIL FROM, RCPT TO and DATA, then takes the message and
   * never answers its end (`stallAt: 'end-of-data'`), or never answers MAIL FROM (`'mail'`).
   */
  const stallingMx = (stallAt: 'mail' | 'end-of-data', received: { message: string | null }) => (socket: Socket): void => {
    socket.on('error', () => undefined);
    socket.write('220 mx.rcpt.test ESMTP\r\n');
    let buffer = '';
    let inData = false;
    socket.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('latin1');
      if (inData) {
        const end = buffer.indexOf('\r\n.\r\n');
        if (end !== -1) received.message = buffer.slice(0, end);
        return;
      }
      for (let eol = buffer.indexOf('\r\n'); eol !== -1 && !inData; eol = buffer.indexOf('\r\n')) {
        const line = buffer.slice(0, eol).toUpperCase();
        buffer = buffer.slice(eol + 2);
        if (line.startsWith('EHLO')) socket.write('250 mx.rcpt.test\r\n');
        else if (line.startsWith('MAIL') && stallAt === 'mail') return;
        else if (line.startsWith('MAIL') || line.startsWith('RCPT')) socket.write('250 2.1.0 Ok\r\n');
        else if (line === 'DATA') {
          socket.write('354 Go ahead\r\n');
          inData = true;
        } else socket.write('500 5.5.2 What?\r\n');
      }
    });
  };

  it('ends a session stalled at MAIL FROM when the attempt deadline passes: deferred, well before the socket timeout', async () => {
    const started = Date.now();
    const r = await deliverToRawMx(stallingMx('mail', { message: null }), { connectMs: 2000, greetingMs: 2000, socketMs: 15_000 }, AbortSignal.timeout(500));
    expect(r).to.include({ outcome: 'deferred', smtpCode: null, smtpResponse: null, mx: 'mx.rcpt.test' });
    expect(r.detail).to.match(/^Attempt deadline exceeded/);
    expect(Date.now() - started).to.be.below(3000);
  });

  it('a deadline after the end of the message, before its reply, defers it: the MX may have taken it (at least once)', async () => {
    const received = { message: null as string | null };
    const started = Date.now();
    const r = await deliverToRawMx(stallingMx('end-of-data', received), { connectMs: 2000, greetingMs: 2000, socketMs: 15_000 }, AbortSignal.timeout(800));
    expect(received.message, 'the MX had the whole message').to.match(/DKIM-Signature/);
    expect(r).to.include({ outcome: 'deferred', smtpCode: null, mx: 'mx.rcpt.test' });
    expect(r.detail).to.match(/^Attempt deadline exceeded/);
    expect(Date.now() - started).to.be.below(3000);
  });

  it('past the deadline nothing new is started: no lookup, no connection, every recipient deferred (direct and relay)', async () => {
    const s = await sink();
    const queriesBefore = dns.queries.length;
    const recipients = ['a@rcpt.test', 'b@other.test'];
    const common = { raw: await signedMessage({ to: recipients }), envelopeFrom: `bounces@${SENDER_DOMAIN}`, recipients, resolver, hostname: HOSTNAME, timeouts, signal: AbortSignal.abort() };
    const direct = await deliverMessage({ ...common, mxPort: s.port, allowPrivateAddresses: true });
    const relayed = await deliverMessage({ ...common, mxPort: 25, relayUrl: `smtp://relay.test:${s.port}` });
    for (const r of [...direct, ...relayed]) {
      expect(r).to.include({ outcome: 'deferred', smtpCode: null });
      expect(r.detail).to.match(/^Attempt deadline exceeded/);
    }
    expect(direct.map((r) => r.recipient)).to.have.members(recipients);
    expect(relayed.map((r) => r.recipient)).to.deep.equal(recipients);
    expect(s.connections).to.equal(0);
    expect(dns.queries.length).to.equal(queriesBefore);
  });

  it('defers naming every MX host when none gave a verdict: the first refused the connection, the second dropped the session', async () => {
    const r = await deliverToRawMx((socket) => {
      socket.write('220 up.twomx.test ESMTP\r\n');
      socket.once('data', () => socket.destroy());
    }, timeouts, undefined, 'twomx.test');
    expect(r).to.include({ outcome: 'deferred', smtpCode: null, enhancedCode: null, smtpResponse: null, mx: 'up.twomx.test' });
    expect(r.detail).to.match(/^No MX host of twomx\.test took the message: down\.failover\.test: ESOCKET: connect ECONNREFUSED 127\.0\.0\.2:\d+; up\.twomx\.test: ECONNECTION: Connection closed unexpectedly$/);
  });

  it('defers with the reply of the last MX host when it gave one (451 greeting), the unreachable first one not named', async () => {
    const r = await deliverToRawMx((socket) => socket.end('451 4.3.2 up.twomx.test: try again later\r\n'), timeouts, undefined, 'twomx.test');
    expect(r).to.include({ outcome: 'deferred', smtpCode: '451', enhancedCode: '4.3.2', mx: 'up.twomx.test' });
    expect(r.smtpResponse).to.equal('451 4.3.2 up.twomx.test: try again later');
    expect(r.detail).not.to.match(/No MX host|down\.failover\.test/);
  });

  it('defers naming each address of one MX host when none gave a verdict: the first refused the connection, the second dropped the session', async () => {
    const r = await deliverToRawMx((socket) => {
      socket.write('220 mx.twoaddr.test ESMTP\r\n');
      socket.once('data', () => socket.destroy());
    }, timeouts, undefined, 'twoaddr.test');
    expect(r).to.include({ outcome: 'deferred', smtpCode: null, enhancedCode: null, smtpResponse: null, mx: 'mx.twoaddr.test' });
    expect(r.detail).to.match(/^No MX host of twoaddr\.test took the message: mx\.twoaddr\.test\[127\.0\.0\.2\]: ESOCKET: connect ECONNREFUSED 127\.0\.0\.2:\d+; mx\.twoaddr\.test\[127\.0\.0\.1\]: ECONNECTION: Connection closed unexpectedly$/);
  });

  it('defers with the reply of the last address of one MX host when it gave one (421 greeting)', async () => {
    const r = await deliverToRawMx((socket) => socket.end('421 4.3.2 mx.twoaddr.test: too busy\r\n'), timeouts, undefined, 'twoaddr.test');
    expect(r).to.include({ outcome: 'deferred', smtpCode: '421', enhancedCode: '4.3.2', smtpResponse: '421 4.3.2 mx.twoaddr.test: too busy', mx: 'mx.twoaddr.test' });
    expect(r.detail).not.to.match(/No MX host|127\.0\.0\.2/);
  });

  it('defers, keeping the greeting, when the MX greets with 554 (it refuses to talk at all, not to this recipient)', async () => {
    const r = await deliverToRawMx((socket) => socket.end('554 5.7.1 mx.rcpt.test: no SMTP service here\r\n'), timeouts);
    expect(r).to.include({ outcome: 'deferred', smtpCode: '554', mx: 'mx.rcpt.test' });
    expect(r.smtpResponse).to.match(/no SMTP service here/);
  });

  it('delivers to several domains in parallel, one session per domain', async () => {
    const s = await sink();
    const recipients = ['a@rcpt.test', 'b@other.test', 'c@rcpt.test'];
    const results = await deliver(s, await signedMessage({ to: recipients }), recipients);
    expect(results.map((r) => [r.recipient, r.outcome, r.mx])).to.have.deep.members([
      ['a@rcpt.test', 'delivered', 'mx.rcpt.test'],
      ['c@rcpt.test', 'delivered', 'mx.rcpt.test'],
      ['b@other.test', 'delivered', 'mx.other.test'],
    ]);
    await s.waitFor(2);
    expect(s.connections).to.equal(2);
    expect(s.messages.map((m) => m.envelope.rcptTo).sort()).to.deep.equal([['a@rcpt.test', 'c@rcpt.test'], ['b@other.test']]);
  });

  it('an internationalized recipient domain: its MX looked up and its RCPT TO sent in A-labels, the outcome kept under the address as given', async () => {
    const s = await sink();
    const recipients = ['ana@bücher.test', 'b@rcpt.test'];
    const results = await deliver(s, await signedMessage({ to: ['b@rcpt.test'] }), recipients);
    expect(results.map((r) => [r.recipient, r.outcome, r.mx])).to.have.deep.members([
      ['ana@bücher.test', 'delivered', 'mx.xn--bcher-kva.test'],
      ['b@rcpt.test', 'delivered', 'mx.rcpt.test'],
    ]);
    const received = await s.waitFor(2);
    // The sink (smtp-server) hands A-labels back decoded; that MAIL FROM needed no SMTPUTF8 (which
    // it offers, and which a UTF-8 address would have made the client ask for) shows they went out ASCII.
    expect(received.map((m) => m.envelope.rcptTo).sort()).to.deep.equal([['ana@bücher.test'], ['b@rcpt.test']]);
    for (const m of received) expect(m.mailFromArgs, m.envelope.rcptTo[0]).not.to.have.property('SMTPUTF8');
  });

  it('an internationalized domain refused by its MX keeps the refusal under the address as given', async () => {
    const s = await sink({ rcpt: (address) => (address.startsWith('nobody@') ? { code: 550, message: '5.1.1 No such user' } : 250) });
    const results = byRecipient(await deliver(s, await signedMessage({ to: ['nobody@bücher.test'] }), ['nobody@bücher.test', 'ana@bücher.test']));
    expect(results['nobody@bücher.test']).to.include({ outcome: 'bounced', smtpCode: '550', smtpResponse: '550 5.1.1 No such user' });
    expect(results['ana@bücher.test']).to.include({ outcome: 'delivered' });
  });

  it('a non-ASCII local part: delivered with SMTPUTF8 where the MX offers it; failed without being sent where it does not, the others delivered', async () => {
    const offers = await sink();
    const delivered = byRecipient(await deliver(offers, await signedMessage({ to: ['b@rcpt.test'] }), ['üser@rcpt.test']));
    expect(delivered['üser@rcpt.test']).to.include({ outcome: 'delivered' });
    const [got] = await offers.waitFor(1);
    expect(got.mailFromArgs).to.have.property('SMTPUTF8');

    const plain = await sink({ smtputf8: false });
    const results = byRecipient(await deliver(plain, await signedMessage({ to: ['b@rcpt.test'] }), ['üser@rcpt.test', 'b@rcpt.test']));
    expect(results['üser@rcpt.test']).to.include({ outcome: 'failed', smtpCode: null, mx: 'mx.rcpt.test' });
    expect(results['üser@rcpt.test'].detail).to.match(/does not offer SMTPUTF8/);
    expect(results['b@rcpt.test']).to.include({ outcome: 'delivered' });
    const received = await plain.waitFor(1);
    expect(received.map((m) => m.envelope.rcptTo)).to.deep.equal([['b@rcpt.test']]);
    // Only the non-ASCII one: nothing is sent, and the session is handed back unused.
    const alone = byRecipient(await deliver(plain, await signedMessage({ to: ['b@rcpt.test'] }), ['üser@rcpt.test']));
    expect(alone['üser@rcpt.test']).to.include({ outcome: 'failed' });
    expect(plain.messages).to.have.length(1);
  });

  it('refuses non-public MX addresses unless allowed: a domain whose MX is on loopback, and an address literal, fail with the reason, without connecting', async () => {
    const s = await sink();
    const recipients = ['a@rcpt.test', 'b@[127.0.0.1]', 'c@[10.0.0.5]'];
    const results = byRecipient(await deliverMessage({
      raw: await signedMessage({ to: ['a@rcpt.test'] }), envelopeFrom: `bounces@${SENDER_DOMAIN}`, recipients, resolver, mxPort: s.port, hostname: HOSTNAME, timeouts,
    }));
    expect(results['a@rcpt.test']).to.include({ outcome: 'failed', mx: 'mx.rcpt.test' });
    expect(results['a@rcpt.test'].detail).to.match(/mx\.rcpt\.test has only non-public addresses \(127\.0\.0\.1\).*MX_ALLOW_PRIVATE_ADDRESSES/);
    expect(results['b@[127.0.0.1]'].outcome).to.equal('failed');
    expect(results['b@[127.0.0.1]'].detail).to.match(/non-public addresses \(127\.0\.0\.1\)/);
    expect(results['c@[10.0.0.5]'].detail).to.match(/non-public addresses \(10\.0\.0\.5\)/);
    expect(s.connections, 'nothing was contacted').to.equal(0);
    // Allowed (tests, private networks): the same recipient on loopback is delivered.
    const allowed = byRecipient(await deliver(s, await signedMessage({ to: ['a@rcpt.test'] }), ['a@rcpt.test', 'b@[127.0.0.1]']));
    expect(allowed['a@rcpt.test'].outcome).to.equal('delivered');
    expect(allowed['b@[127.0.0.1]'], 'an address literal goes to that address, no MX lookup').to.include({ outcome: 'delivered', mx: '[127.0.0.1]' });
  });

  describe('relay mode (SMTP_RELAY_URL)', () => {
    const { cert } = testCertificate();

    it('sends everything through the smart host in one authenticated STARTTLS session, without MX lookups', async () => {
      const s = await sink({ auth: { user: 'motor', pass: 'p@ss:word' } });
      const queriesBefore = dns.queries.length;
      const recipients = ['a@far.test', 'b@elsewhere.test'];
      const results = await deliverMessage({
        raw: await signedMessage({ to: recipients }),
        envelopeFrom: `bounces@${SENDER_DOMAIN}`,
        recipients,
        resolver,
        mxPort: 25,
        relayUrl: `smtp://motor:${encodeURIComponent('p@ss:word')}@relay.test:${s.port}`,
        relayTls: { ca: cert },
        hostname: HOSTNAME,
        timeouts,
      });
      expect(results.map((r) => [r.recipient, r.outcome, r.mx])).to.deep.equal([
        ['a@far.test', 'delivered', 'relay.test'],
        ['b@elsewhere.test', 'delivered', 'relay.test'],
      ]);
      const [received] = await s.waitFor(1);
      expect(received).to.deep.include({ secure: true, user: 'motor' });
      expect(received.envelope.rcptTo).to.deep.equal(recipients);
      expect(s.connections).to.equal(1);
      expect(dns.queries.slice(queriesBefore).filter((q) => q.type === 'MX')).to.deep.equal([]);
    });

    it('defers with the 535 reply when the relay refuses the credentials', async () => {
      const s = await sink({ auth: { user: 'motor', pass: 'right' } });
      const [r] = await deliverViaRelay(`smtp://motor:wrong@relay.test:${s.port}`, {
        raw: await signedMessage({ to: ['a@far.test'] }),
        envelopeFrom: `bounces@${SENDER_DOMAIN}`,
        recipients: ['a@far.test'],
        resolver,
        hostname: HOSTNAME,
        timeouts,
        tls: { ca: cert },
      });
      expect(r).to.include({ outcome: 'deferred', smtpCode: '535', mx: 'relay.test' });
      expect(s.messages).to.have.length(0);
    });

    it('never sends credentials to a relay that cannot STARTTLS', async () => {
      const s = await sink({ auth: { user: 'motor', pass: 'secret' }, starttls: false });
      const [r] = await deliverViaRelay(`smtp://motor:secret@relay.test:${s.port}`, {
        raw: await signedMessage({ to: ['a@far.test'] }),
        envelopeFrom: `bounces@${SENDER_DOMAIN}`,
        recipients: ['a@far.test'],
        resolver,
        hostname: HOSTNAME,
        timeouts,
        tls: { ca: cert },
      });
      expect(r).to.include({ outcome: 'deferred', mx: 'relay.test' });
      expect(r.detail).to.match(/STARTTLS/);
      expect(s.messages).to.have.length(0);
    });

    it('defers naming each address of a relay name when none gave a verdict, and keeps the last one\'s reply when it gave one', async () => {
      const opts = {
        raw: await signedMessage({ to: ['a@far.test'] }), envelopeFrom: `bounces@${SENDER_DOMAIN}`, recipients: ['a@far.test'], resolver, hostname: HOSTNAME, timeouts, tls: { ca: cert },
      };
      // 127.0.0.1 greets and drops the session at EHLO: no reply to keep, so both addresses are named.
      const sockets: Socket[] = [];
      const dropping: Server = createServer((socket) => {
        sockets.push(socket);
        socket.write('220 smtp.test ESMTP\r\n');
        socket.once('data', () => socket.destroy());
      });
      await new Promise<void>((resolve) => dropping.listen(0, '127.0.0.1', resolve));
      try {
        const port = (dropping.address() as AddressInfo).port;
        const [r] = await deliverViaRelay(`smtp://smtp.test:${port}`, opts);
        expect(r).to.include({ outcome: 'deferred', smtpCode: null, smtpResponse: null, mx: 'smtp.test' });
        expect(r.detail).to.equal(`No address of relay smtp.test took the message: smtp.test[127.0.0.2]: ESOCKET: connect ECONNREFUSED 127.0.0.2:${port}; smtp.test[127.0.0.1]: ECONNECTION: Connection closed unexpectedly`);
      } finally {
        sockets.forEach((sk) => sk.destroy());
        await new Promise((resolve) => dropping.close(resolve));
      }

      // 127.0.0.1 refuses the credentials: its 535 is the verdict, as with one address.
      const s = await sink({ auth: { user: 'motor', pass: 'right' } });
      const [refused] = await deliverViaRelay(`smtp://motor:wrong@smtp.test:${s.port}`, opts);
      expect(refused).to.include({ outcome: 'deferred', smtpCode: '535', mx: 'smtp.test' });
      expect(refused.detail).not.to.match(/No address|127\.0\.0\.2/);
    });

    it('speaks implicit TLS for smtps:// and verifies the relay certificate', async () => {
      const s = await sink({ secure: true, auth: { user: 'u', pass: 'p' } });
      const opts = {
        raw: await signedMessage({ to: ['a@far.test'] }),
        envelopeFrom: `bounces@${SENDER_DOMAIN}`,
        recipients: ['a@far.test'],
        resolver,
        hostname: HOSTNAME,
        timeouts,
      };
      const url = `smtps://u:p@relay.test:${s.port}`;
      const [ok] = await deliverViaRelay(url, { ...opts, tls: { ca: cert } });
      expect(ok).to.include({ outcome: 'delivered', smtpCode: '250' });
      expect((await s.waitFor(1))[0].secure).to.equal(true);

      // By IP: the certificate is checked against its IP address entry, without SNI.
      const [byIp] = await deliverViaRelay(`smtps://u:p@127.0.0.1:${s.port}`, { ...opts, tls: { ca: cert } });
      expect(byIp).to.include({ outcome: 'delivered', mx: '127.0.0.1' });

      const [untrusted] = await deliverViaRelay(url, opts);
      expect(untrusted).to.include({ outcome: 'deferred', smtpCode: null });
      expect(untrusted.detail).to.match(/self[- ]signed|certificate/i);
      expect(s.messages).to.have.length(2);
    });
  });
});
