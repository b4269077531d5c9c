import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import type { SmtpSubmissionRefused } from '../../domain/events';
import { eventually } from '../support/motor';
import { RawClient, rawSession, rfc822, startSmtpHarness, type SmtpHarness } from './harness';

/**
 * The session's error limits (Postfix's smtpd_soft_error_limit, smtpd_hard_error_limit,
 * smtpd_error_sleep_time) over real sockets: hard limit 5, soft limit 3 with 300 ms per command
 * past it.
 */
describe('SMTP error limits (int)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;

  before(async () => {
    h = await startSmtpHarness({
      env: { SMTP_HARD_ERROR_LIMIT: '5', SMTP_SOFT_ERROR_LIMIT: '3', SMTP_ERROR_SLEEP_MS: '300' },
    });
  });
  after(async () => {
    await h?.close();
  });

  const submissionEvents = async (motorBlockId: string) => (await h.motor.rt.store.readStream(streamName('smtpSubmission', motorBlockId)));
  const refused = (events: Awaited<ReturnType<typeof submissionEvents>>) => events.filter((e) => e.type === 'SmtpSubmissionRefused').map((e) => e.data as SmtpSubmissionRefused);

  it('the 5th error is followed by 421 4.7.0 <host> Error: too many errors and the connection closes; commands pipelined behind it are not run', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    for (let i = 1; i <= 4; i++) expect(await c.command(`MAIL FROM:<app${i}@other.test>`)).to.match(/^553 5\.7\.1 /);
    // The 5th refusal with three more commands pipelined behind it, one of them a refusal that would be recorded.
    c.write(`MAIL FROM:<app5@other.test>\r\nMAIL FROM:<app6@other.test>\r\nMAIL FROM:<app@${b.domain}>\r\nRCPT TO:<user@rcpt.test>\r\n`);
    expect(await c.reply()).to.match(/^553 5\.7\.1 /);
    expect(await c.reply()).to.equal('421 4.7.0 localhost Error: too many errors');
    expect(await c.reply()).to.equal(null);
    expect(await c.closedWithin(2000)).to.equal(true);

    // Five refusals answered, five recorded (after the replies, so not necessarily in their order);
    // nothing pipelined behind the fifth ran.
    await eventually(async () => refused(await submissionEvents(b.motorBlockId)).length >= 5);
    await new Promise((r) => setTimeout(r, 300));
    const events = refused(await submissionEvents(b.motorBlockId));
    expect(events.map((e) => e.envelopeFrom).sort()).to.deep.equal(['app1@other.test', 'app2@other.test', 'app3@other.test', 'app4@other.test', 'app5@other.test']);
    expect(events[0]).to.deep.include({ code: 'from_domain_mismatch', recipientCount: 0 });
  });

  it('a session with a few errors is unaffected: 4 errors, a message, 4 more (a message accepted forgives the errors before it), a message, QUIT', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    const send = async (tag: string) => {
      expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
      expect(await c.command('RCPT TO:<user@rcpt.test>')).to.match(/^250 /);
      expect(await c.command('DATA')).to.match(/^354 /);
      expect(await c.command(`${rfc822({ from: `app@${b.domain}`, to: 'user@rcpt.test', subject: tag })}.`)).to.match(/^250 2\.6\.0 /);
    };
    // Different errors: a refused sender, bad syntax, a bad sequence, an unknown command.
    const errors = async () => {
      expect(await c.command('MAIL FROM:<app@other.test>')).to.match(/^553 /);
      expect(await c.command('MAIL FROM:<app@localhost>')).to.match(/^553 5\.1\.7 /);
      expect(await c.command('RCPT TO:<user@rcpt.test>')).to.match(/^503 /);
      expect(await c.command('BOGUS')).to.match(/^500 /);
    };
    await errors();
    await send('one');
    await errors();
    await send('two');
    expect(await c.command('QUIT')).to.match(/^221 /);
    c.end();
  });

  it('452 too many recipients is no error: a transaction past the recipient ceiling goes on', async () => {
    const b = await h.newBlock();
    await h.motor.setLimits(b.motorBlockId, { burst: 1, hourly: 100, daily: 1000 });
    const c = await rawSession(h, b);
    expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
    expect(await c.command('RCPT TO:<r0@rcpt.test>')).to.match(/^250 /);
    for (let i = 1; i <= 8; i++) expect(await c.command(`RCPT TO:<r${i}@rcpt.test>`)).to.match(/^452 4\.5\.3 /);
    expect(await c.command('NOOP')).to.match(/^250 /);
    c.end();
  });

  it('from the soft limit on, every command waits SMTP_ERROR_SLEEP_MS before it is answered', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    const timed = async (line: string) => {
      const t = Date.now();
      const r = await c.command(line);
      return { r, ms: Date.now() - t };
    };
    for (let i = 0; i < 3; i++) expect((await timed('BOGUS')).ms).to.be.below(250);
    const noop = await timed('NOOP');
    expect(noop.r).to.match(/^250 /);
    expect(noop.ms).to.be.at.least(280);
    c.end();
  });

  // The delay hands commands on later; the parser STARTTLS retires must still dispatch none of them.
  it('past the soft limit, commands pipelined after STARTTLS in cleartext are still discarded', async () => {
    const c = await RawClient.connect(h.port);
    await c.reply();
    await c.command('EHLO client.test');
    for (let i = 0; i < 3; i++) expect(await c.command('BOGUS')).to.match(/^500 /);
    c.write('STARTTLS\r\nQUIT\r\n');
    expect(await c.reply()).to.match(/^220 /);
    await c.startTls(h.ca);
    // Had the injected QUIT run inside TLS, this would be 221 and a closed connection.
    expect(await c.command('NOOP')).to.match(/^250 /);
    c.end();
  });
});
