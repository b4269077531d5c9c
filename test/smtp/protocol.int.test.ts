import { execFile } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import type { MessageAccepted } from '../../domain/events';
import { eventually } from '../support/motor';
import { RawClient, rfc822, startSmtpHarness, type SmtpHarness } from './harness';

/**
 * The listener as a hardened MTA, driven by a raw socket (hostile cases) and swaks (pipelining,
 * size): TLS before AUTH, no relaying, STARTTLS command injection, smuggling with bare LF, line
 * length, recipients and size caps, idle timeout, pregreet, AUTH failure limits.
 */
describe('SMTP listener protocol limits (int)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;
  let block: Awaited<ReturnType<SmtpHarness['newBlock']>>;

  before(async () => {
    h = await startSmtpHarness({
      // The idle timeout through its variable (the runtime's wiring, not a listener option).
      env: { SMTP_MAX_MESSAGE_BYTES: '65536', SMTP_MAX_RECIPIENTS: '3', SMTP_IDLE_TIMEOUT_SECONDS: '2' },
    });
    block = await h.newBlock();
  });
  after(async () => {
    await h?.close();
  });

  /** Connected, greeted, EHLO'd, TLS (STARTTLS or implicit) and, unless told otherwise, authenticated. */
  async function session(o: { implicit?: boolean; auth?: boolean } = {}): Promise<RawClient> {
    const c = await RawClient.connect(o.implicit ? h.securePort : h.port, o.implicit, h.ca);
    expect(await c.reply()).to.match(/^220 /);
    expect(await c.command('EHLO client.test')).to.match(/^250/);
    if (!o.implicit) {
      expect(await c.command('STARTTLS')).to.match(/^220 /);
      await c.startTls(h.ca);
      expect(await c.command('EHLO client.test')).to.match(/^250/);
    }
    if (o.auth !== false) expect(await c.authPlain(block.smtpUsername, block.smtpPassword)).to.match(/^235 2\.7\.0/);
    return c;
  }

  it('pregreet: an unknown client waits ~100 ms for the greeting and talking first is refused; a client that authenticated recently is greeted at once', async () => {
    h.smtp.smtp!.known!.clear();
    const early = await RawClient.connect(h.port);
    early.write('EHLO too.soon\r\n');
    expect(await early.reply()).to.match(/^421 .*talk too soon/i);
    early.end();

    const greetingMs = async () => {
      const t = process.hrtime.bigint();
      const c = await RawClient.connect(h.port);
      await c.reply();
      const ms = Number(process.hrtime.bigint() - t) / 1e6;
      c.end();
      return ms;
    };
    expect(await greetingMs()).to.be.at.least(90);
    (await session()).end();
    expect(await greetingMs()).to.be.below(50);
  });

  it('before TLS: EHLO offers STARTTLS but not AUTH; AUTH is 538 5.7.0; MAIL is 530 5.7.0 (no relaying)', async () => {
    const c = await RawClient.connect(h.port);
    expect(await c.reply()).to.match(/^220 /);
    const ehlo = (await c.command('EHLO client.test'))!;
    expect(ehlo).to.include('STARTTLS');
    expect(ehlo).to.not.match(/AUTH/);
    expect(ehlo).to.include('SIZE 65536');
    expect(ehlo).to.include('ENHANCEDSTATUSCODES');
    expect(await c.authPlain(block.smtpUsername, block.smtpPassword)).to.match(/^538 5\.7\.0 /);
    expect(await c.command(`MAIL FROM:<app@${block.domain}>`)).to.match(/^530 5\.7\.0 /);
    c.end();
  });

  it('after STARTTLS: AUTH PLAIN LOGIN offered, STARTTLS no more; implicit TLS without AUTH cannot relay', async () => {
    const c = await session({ auth: false });
    c.end();
    const s = await RawClient.connect(h.port);
    await s.reply();
    await s.command('EHLO client.test');
    await s.command('STARTTLS');
    await s.startTls(h.ca);
    const ehlo = (await s.command('EHLO client.test'))!;
    expect(ehlo).to.include('AUTH PLAIN LOGIN');
    expect(ehlo).to.not.include('STARTTLS');
    s.end();

    const i = await session({ implicit: true, auth: false });
    expect(await i.command(`MAIL FROM:<app@${block.domain}>`)).to.match(/^530 5\.7\.0 /);
    expect(await i.command('RCPT TO:<victim@rcpt.test>')).to.match(/^5\d\d /);
    i.end();
  });

  it('STARTTLS command injection: commands pipelined after STARTTLS in cleartext are discarded', async () => {
    const c = await RawClient.connect(h.port);
    await c.reply();
    await c.command('EHLO client.test');
    c.write('STARTTLS\r\nQUIT\r\n');
    expect(await c.reply()).to.match(/^220 /);
    await c.startTls(h.ca);
    // Had the injected QUIT run inside TLS, this would be 221 and a closed connection.
    expect(await c.command('NOOP')).to.match(/^250 /);
    c.end();
  });

  it('bare LF: a smuggled end-of-data (\\n.\\n, \\n.\\r\\n, \\r\\n.\\n) stays message content, and the kept message has CRLF only', async () => {
    const c = await session();
    expect(await c.command(`MAIL FROM:<app@${block.domain}>`)).to.match(/^250 /);
    expect(await c.command('RCPT TO:<user@rcpt.test>')).to.match(/^250 /);
    expect(await c.command('DATA')).to.match(/^354 /);
    const smuggled = `MAIL FROM:<app@${block.domain}>\r\nRCPT TO:<smuggled@rcpt.test>\r\nDATA\r\nFrom: app@${block.domain}\r\n\r\nsmuggled\r\n`;
    c.write(`From: app@${block.domain}\r\nTo: user@rcpt.test\r\nSubject: smuggling\r\n\r\nline one\n.\n${smuggled}x\n.\r\n${smuggled}y\r\n.\n${smuggled}end\r\n.\r\n`);
    const done = (await c.reply())!;
    expect(done).to.match(/^250 2\.6\.0 /);
    // The next reply belongs to our NOOP: nothing of the smuggled transaction ran.
    expect(await c.command('NOOP')).to.match(/^250 /);
    c.end();
    const id = /queued as ([0-9a-f-]{36})/.exec(done)![1];
    const event = (await h.motor.rt.store.readStream(streamName('message', id)))[0].data as MessageAccepted;
    expect(event.to).to.deep.equal(['user@rcpt.test']);
    expect(event.raw).to.include('RCPT TO:<smuggled@rcpt.test>');
    expect(/(?<!\r)\n/.test(event.raw!)).to.equal(false);
    expect(/\r(?!\n)/.test(event.raw!)).to.equal(false);
  });

  it('SMTPUTF8 is not offered, so it is refused: the SMTPUTF8 (and REQUIRETLS) parameter is 555 5.5.4, a non-ASCII local part 553 5.6.7 (RFC 6531), the session goes on', async () => {
    const ehlo = await RawClient.connect(h.securePort, true, h.ca);
    await ehlo.reply();
    expect(await ehlo.command('EHLO client.test')).to.not.match(/SMTPUTF8|REQUIRETLS/);
    ehlo.end();

    const c = await session({ implicit: true });
    expect(await c.command(`MAIL FROM:<app@${block.domain}> SMTPUTF8`)).to.match(/^555 5\.5\.4 /);
    expect(await c.command(`MAIL FROM:<app@${block.domain}> REQUIRETLS`)).to.match(/^555 5\.5\.4 /);
    expect(await c.command(`MAIL FROM:<appé@${block.domain}>`)).to.match(/^553 5\.6\.7 /);
    expect(await c.command(`MAIL FROM:<app@${block.domain}> BODY=8BITMIME`)).to.match(/^250 /);
    expect(await c.command('RCPT TO:<üser@rcpt.test>')).to.match(/^553 5\.6\.7 /);
    expect(await c.command('RCPT TO:<用户@bücher.test>')).to.match(/^553 5\.6\.7 /);
    expect(await c.command('RCPT TO:<user@rcpt.test>')).to.match(/^250 /);
    expect(await c.command('DATA')).to.match(/^354 /);
    c.write(`From: app@${block.domain}\r\nTo: user@rcpt.test\r\nSubject: after the refusals\r\n\r\nbody\r\n.\r\n`);
    const done = (await c.reply())!;
    expect(done).to.match(/^250 2\.6\.0 /);
    c.end();
    const id = /queued as ([0-9a-f-]{36})/.exec(done)![1];
    expect(((await h.motor.rt.store.readStream(streamName('message', id)))[0].data as MessageAccepted).to).to.deep.equal(['user@rcpt.test']);
  });

  it('internationalized domains with ASCII local parts are accepted and kept in A-labels: a recipient domain sent as A-labels or U-labels, the sender of a block whose domain is an IDN; delivered without SMTPUTF8', async () => {
    const idn = await h.newBlock({ domain: 'xn--mnchen-3ya.test' });
    h.dns.addRecords('xn--bcher-kva.test', { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] });
    const c = await RawClient.connect(h.securePort, true, h.ca);
    await c.reply();
    await c.command('EHLO client.test');
    expect(await c.authPlain(idn.smtpUsername, idn.smtpPassword)).to.match(/^235 /);
    expect(await c.command('MAIL FROM:<app@xn--mnchen-3ya.test>')).to.match(/^250 /);
    expect(await c.command('RCPT TO:<ana@bücher.test>')).to.match(/^250 /);
    expect(await c.command('RCPT TO:<bob@xn--bcher-kva.test>')).to.match(/^250 /);
    expect(await c.command('RCPT TO:<bad@⒈.test>')).to.match(/^553 5\.1\.3 /);
    expect(await c.command('DATA')).to.match(/^354 /);
    c.write('From: App <app@xn--mnchen-3ya.test>\r\nTo: ana@xn--bcher-kva.test\r\nMessage-ID: <idn.1@client.example>\r\nSubject: IDN\r\n\r\nbody\r\n.\r\n');
    const done = (await c.reply())!;
    expect(done).to.match(/^250 2\.6\.0 /);
    c.end();
    const id = /queued as ([0-9a-f-]{36})/.exec(done)![1];
    const event = (await h.motor.rt.store.readStream(streamName('message', id)))[0].data as MessageAccepted;
    expect(event.to).to.deep.equal(['ana@xn--bcher-kva.test', 'bob@xn--bcher-kva.test']);
    expect(event.from).to.equal('app@xn--mnchen-3ya.test');
    expect(event.envelopeFrom, 'kept only when it differs from `from`').to.equal(undefined);
    const received = await eventually(async () => {
      const list = h.mx.messages.filter((m) => m.raw.toString().includes('idn.1@client.example'));
      return list.flatMap((m) => m.envelope.rcptTo).length === 2 ? list : null;
    }, 20_000);
    // The sink (smtp-server) hands A-labels back decoded; a UTF-8 address would have made the client ask for SMTPUTF8.
    for (const m of received) {
      expect(m.mailFromArgs).not.to.have.property('SMTPUTF8');
      expect(m.envelope.mailFrom).to.equal('app@münchen.test');
    }
    expect(received.flatMap((m) => m.envelope.rcptTo).sort()).to.deep.equal(['ana@bücher.test', 'bob@bücher.test']);
  });

  it('a command line over the limit is refused and the connection closed', async () => {
    const c = await RawClient.connect(h.port);
    await c.reply();
    expect(await c.command(`EHLO ${'a'.repeat(3000)}`)).to.match(/^(421|500) /);
    expect(await c.closedWithin(3000)).to.equal(true);
  });

  it('more recipients than SMTP_MAX_RECIPIENTS: 452 4.5.3', async () => {
    const c = await session();
    await c.command(`MAIL FROM:<app@${block.domain}>`);
    for (const r of ['a', 'b', 'c']) expect(await c.command(`RCPT TO:<${r}@rcpt.test>`)).to.match(/^250 /);
    expect(await c.command('RCPT TO:<d@rcpt.test>')).to.match(/^452 4\.5\.3 /);
    c.end();
  });

  it('idle timeout (SMTP_IDLE_TIMEOUT_SECONDS): a silent client gets 421 4.4.2 and is disconnected', async () => {
    const c = await RawClient.connect(h.port);
    await c.reply();
    const t = Date.now();
    expect(await c.reply(6000)).to.match(/^421 4\.4\.2 /);
    expect(Date.now() - t).to.be.within(1800, 4500);
    expect(await c.closedWithin(3000)).to.equal(true);
  });

  it('AUTH failures: the third in a session closes it (421), and further attempts from the address are slowed down', async () => {
    const c = await session({ auth: false });
    expect(await c.authPlain(block.smtpUsername, 'wrong-1')).to.match(/^535 5\.7\.8 /);
    expect(await c.authPlain(block.smtpUsername, 'wrong-2')).to.match(/^535 5\.7\.8 /);
    expect(await c.authPlain(block.smtpUsername, 'wrong-3')).to.match(/^421 4\.7\.0 /);
    expect(await c.closedWithin(3000)).to.equal(true);

    const d = await session({ auth: false });
    const t = Date.now();
    expect(await d.authPlain(block.smtpUsername, block.smtpPassword)).to.match(/^235 /);
    expect(Date.now() - t).to.be.at.least(240);
    d.end();
  });

  describe('with swaks', () => {
    const swaks = async (args: string[]) => {
      try {
        const r = await promisify(execFile)('swaks', ['--server', '127.0.0.1', '--suppress-data', ...args], { timeout: 30_000 });
        return { code: 0, out: r.stdout + r.stderr };
      } catch (e) {
        const err = e as { code: number; stdout: string; stderr: string };
        return { code: err.code, out: `${err.stdout}${err.stderr}` };
      }
    };
    const authArgs = () => ['--auth', 'PLAIN', '--auth-user', block.smtpUsername, '--auth-password', block.smtpPassword];

    it('PIPELINING with STARTTLS and AUTH: accepted', async () => {
      const r = await swaks(['--port', String(h.port), '--tls', '--pipeline', ...authArgs(), '--from', `app@${block.domain}`, '--to', 'pipe@rcpt.test',
        '--header', `From: app@${block.domain}`, '--header', 'Subject: pipelined', '--body', 'pipelined body']);
      expect(r.code, r.out).to.equal(0);
      expect(r.out).to.match(/PIPELINING/);
      expect(r.out).to.match(/250 2\.6\.0 /);
    });

    it('a message over SMTP_MAX_MESSAGE_BYTES: 552 5.3.4 (declared SIZE at MAIL FROM, and undeclared at DATA)', async () => {
      const file = join(tmpdir(), `motor-big-${process.pid}.eml`);
      writeFileSync(file, rfc822({ from: `app@${block.domain}`, to: 'big@rcpt.test', body: `${'x'.repeat(76)}\r\n`.repeat(1000) }));
      const r = await swaks(['--port', String(h.securePort), '--tls-on-connect', ...authArgs(), '--from', `app@${block.domain}`, '--to', 'big@rcpt.test',
        '--data', file]).finally(() => rmSync(file, { force: true }));
      expect(r.code).to.not.equal(0);
      expect(r.out).to.match(/552 5\.3\.4/);

      const c = await session();
      expect(await c.command(`MAIL FROM:<app@${block.domain}> SIZE=100000`)).to.match(/^552 5\.3\.4 /);
      c.end();
    });
  });
});
