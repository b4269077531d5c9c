import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import type { MessageAccepted, SmtpAuthFailed, SmtpAuthFailuresSummarized, SmtpSubmissionRefused, SmtpSubmissionRefusalsSummarized } from '../../domain/events';
import { eventually } from '../support/motor';
import { RawClient, rawSession, rawTlsSession, rfc822, startSmtpHarness, type SmtpHarness } from './harness';

/**
 * The session's error limits (Postfix's smtpd_soft_error_limit, smtpd_hard_error_limit,
 * smtpd_error_sleep_time) and the bound on refusal events across sessions, over real sockets:
 * hard limit 5, soft limit 3 with 300 ms per command past it, 4 refusal events recorded per block
 * (AUTH: per client address) per 3 s window.
 */
describe('SMTP error limits (int)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;
  const WINDOW_MS = 3000;

  before(async () => {
    h = await startSmtpHarness({
      env: {
        SMTP_HARD_ERROR_LIMIT: '5', SMTP_SOFT_ERROR_LIMIT: '3', SMTP_ERROR_SLEEP_MS: '300',
        SMTP_REFUSAL_EVENT_LIMIT: '4', SMTP_REFUSAL_EVENT_WINDOW_SECONDS: String(WINDOW_MS / 1000),
      },
    });
  });
  after(async () => {
    await h?.close();
  });

  const submissionEvents = async (motorBlockId: string) => (await h.motor.rt.store.readStream(streamName('smtpSubmission', motorBlockId)));
  const refused = (events: Awaited<ReturnType<typeof submissionEvents>>) => events.filter((e) => e.type === 'SmtpSubmissionRefused').map((e) => e.data as SmtpSubmissionRefused);
  const summaries = (events: Awaited<ReturnType<typeof submissionEvents>>) => events.filter((e) => e.type === 'SmtpSubmissionRefusalsSummarized').map((e) => e.data as SmtpSubmissionRefusalsSummarized);

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

    // Five refusals answered, five accounted for: four events (the block's limit) and one summary at the window's end.
    const events = await eventually(async () => {
      const all = await submissionEvents(b.motorBlockId);
      return summaries(all).length > 0 ? all : null;
    }, WINDOW_MS + 5000);
    // Appended after the replies, so not necessarily in their order.
    expect(refused(events).map((e) => e.envelopeFrom).sort()).to.deep.equal(['app1@other.test', 'app2@other.test', 'app3@other.test', 'app4@other.test']);
    expect(summaries(events).map((s) => s.refusals)).to.deep.equal([1]);
  });

  it('refusal events are bounded across sessions: the first 4 of the window recorded as before, the rest counted in one summary', async () => {
    const b = await h.newBlock();
    let answered = 0;
    for (let s = 0; s < 3; s++) {
      const c = await rawSession(h, b);
      for (let i = 1; i <= 5; i++) {
        expect(await c.command(`MAIL FROM:<s${s}r${i}@other.test>`)).to.match(/^553 5\.7\.1 /);
        answered += 1;
      }
      expect(await c.reply()).to.match(/^421 4\.7\.0 /);
      expect(await c.closedWithin(2000)).to.equal(true);
    }
    expect(answered).to.equal(15);
    const events = await eventually(async () => {
      const all = await submissionEvents(b.motorBlockId);
      return summaries(all).length > 0 ? all : null;
    }, WINDOW_MS + 5000);
    // The start of the burst reads as it always did.
    expect(refused(events).map((e) => e.envelopeFrom).sort()).to.deep.equal(['s0r1@other.test', 's0r2@other.test', 's0r3@other.test', 's0r4@other.test']);
    expect(refused(events)[0]).to.deep.include({ code: 'from_domain_mismatch', recipientCount: 0 });
    const [summary] = summaries(events);
    expect(summary).to.deep.include({ motorBlockId: b.motorBlockId, refusals: 11, limit: 4, windowSeconds: WINDOW_MS / 1000 });
    expect(Date.parse(summary.to)).to.be.at.least(Date.parse(summary.from));
    expect(events).to.have.length(5);

    // A new window records again.
    const c = await rawSession(h, b);
    expect(await c.command('MAIL FROM:<next-window@other.test>')).to.match(/^553 5\.7\.1 /);
    c.end();
    const later = await eventually(async () => {
      const r = refused(await submissionEvents(b.motorBlockId));
      return r.length === 5 ? r : null;
    });
    expect(later.map((e) => e.envelopeFrom)).to.include('next-window@other.test');
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

  // Junk commands past SMTP_JUNK_COMMAND_LIMIT (Postfix's smtpd_junk_command_limit; the default 100 here).
  // rawSession's two EHLOs (before and after STARTTLS) are junk commands too: 98 are left after them.
  const timed = async (c: RawClient, line: string) => {
    const t = Date.now();
    const r = await c.command(line);
    return { r, ms: Date.now() - t };
  };
  const junk = async (c: RawClient, lines: string[]) => {
    for (const line of lines) expect(await c.command(line), line).to.match(/^2\d\d[ -]/);
  };
  const noops = (n: number) => Array.from({ length: n }, () => 'NOOP');
  const expectClosedForErrors = async (c: RawClient) => {
    expect(await c.reply()).to.equal('421 4.7.0 localhost Error: too many errors');
    expect(await c.reply()).to.equal(null);
    expect(await c.closedWithin(2000)).to.equal(true);
  };

  it('the two EHLOs and 98 NOOPs are fine; each one after them is an error: slowed from the soft limit on, 421 4.7.0 and closed at the hard limit', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    await junk(c, noops(98));
    // The 101st to 103rd: errors 1 to 3, answered at once.
    for (let i = 0; i < 3; i++) {
      const n = await timed(c, 'NOOP');
      expect(n.r).to.equal('250 2.0.0 OK');
      expect(n.ms).to.be.below(250);
    }
    // Three errors: the soft limit. The 104th waits SMTP_ERROR_SLEEP_MS (error 4).
    const slowed = await timed(c, 'NOOP');
    expect(slowed.r).to.equal('250 2.0.0 OK');
    expect(slowed.ms).to.be.at.least(280);
    // The 105th is the 5th error: its reply, then the session ends as on any other error; the 106th,
    // pipelined behind it, is not run.
    c.write('NOOP\r\nNOOP\r\n');
    expect(await c.reply()).to.equal('250 2.0.0 OK');
    await expectClosedForErrors(c);
  });

  it('RSET, VRFY and HELP count with NOOP; a junk command refused on its own (VRFY without an address) is one error, not two', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    const cycle = ['RSET', 'VRFY user@rcpt.test', 'HELP', 'NOOP'];
    await junk(c, Array.from({ length: 98 }, (_, i) => cycle[i % cycle.length]));
    expect(await c.command('VRFY')).to.match(/^501 /); // error 1
    await junk(c, ['RSET', 'HELP', 'VRFY user@rcpt.test']); // errors 2 to 4
    expect(await c.command('HELP')).to.match(/^214 /); // error 5
    await expectClosedForErrors(c);
  });

  it('EHLO and HELO count with NOOP (as in Postfix): an authenticated session that loops on EHLO is slowed, then closed with 421 4.7.0', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    // With the two EHLOs of rawSession: 100.
    await junk(c, Array.from({ length: 98 }, (_, i) => (i % 7 ? 'EHLO client.test' : 'HELO client.test')));
    for (let i = 0; i < 3; i++) {
      const e = await timed(c, 'EHLO client.test'); // errors 1 to 3
      expect(e.r).to.match(/^250-localhost /);
      expect(e.ms).to.be.below(250);
    }
    const slowed = await timed(c, 'EHLO client.test'); // error 4, past the soft limit
    expect(slowed.r).to.match(/^250-/);
    expect(slowed.ms).to.be.at.least(280);
    expect(await c.command('HELO client.test')).to.match(/^250 /); // error 5
    await expectClosedForErrors(c);
  });

  it('WIZ, SHELL and KILL (sendmail\'s) are not implemented: 500 5.5.2 as any unknown command, each an error; the session goes on', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    // WIZ with a password was 200 ("wizard mode"), then SHELL and KILL answered as if they existed.
    for (const line of ['WIZ sesame', 'SHELL', 'KILL']) expect(await c.command(line), line).to.match(/^500 5\.5\.2 /); // errors 1 to 3
    expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
    expect(await c.command('RCPT TO:<user@rcpt.test>')).to.match(/^250 /);
    expect(await c.command('DATA')).to.match(/^354 /);
    expect(await c.command(`${rfc822({ from: `app@${b.domain}`, to: 'user@rcpt.test', subject: 'wiz' })}.`)).to.match(/^250 2\.6\.0 /);
    // The message forgave the three; five more errors end the session.
    for (const line of ['KILL', 'SHELL', 'WIZ sesame', 'WIZ']) expect(await c.command(line), line).to.match(/^500 5\.5\.2 /);
    expect(await c.command('SHELL')).to.match(/^500 5\.5\.2 /);
    await expectClosedForErrors(c);
  });

  it('a message accepted resets the junk count, as it forgives the errors: 2 EHLOs + 98 + 2 NOOPs, a message, 100 NOOPs fine, the 5th after them closes', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    await junk(c, noops(100)); // errors 1 and 2
    expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
    expect(await c.command('RCPT TO:<user@rcpt.test>')).to.match(/^250 /);
    expect(await c.command('DATA')).to.match(/^354 /);
    expect(await c.command(`${rfc822({ from: `app@${b.domain}`, to: 'user@rcpt.test', subject: 'junk' })}.`)).to.match(/^250 2\.6\.0 /);
    // RSET after a message is a junk command like any other: it is among the 100.
    await junk(c, ['RSET', ...noops(99)]);
    // The 101st after the message: error 1, not yet slowed.
    const fast = await timed(c, 'NOOP');
    expect(fast.r).to.equal('250 2.0.0 OK');
    expect(fast.ms).to.be.below(250);
    await junk(c, noops(3));
    expect(await c.command('NOOP')).to.equal('250 2.0.0 OK');
    await expectClosedForErrors(c);
  });

  // Last: the failures it makes slow down this address's AUTH for the tests after it.
  it('AUTH failures are bounded per client address: 4 SmtpAuthFailed per window, the rest in one SmtpAuthFailuresSummarized', async () => {
    const before = (await h.motor.rt.store.readStream(streamName('smtpAuth', 'unknown'))).length;
    const failSession = async (names: string[]) => {
      const c = await rawTlsSession(h);
      const replies = [];
      for (const n of names) replies.push(await c.authPlain(n, 'wrong'));
      c.end();
      return replies;
    };
    // The third failure of a session closes it (421); six failures from 127.0.0.1 in two sessions.
    const first = await failSession(['nobody-1', 'nobody-2', 'nobody-3']);
    const second = await failSession(['nobody-4', 'nobody-5', 'nobody-6']);
    for (const r of [...first, ...second]) expect(r).to.match(/^(535 5\.7\.8|421 4\.7\.0) /);

    const events = await eventually(async () => {
      const all = (await h.motor.rt.store.readStream(streamName('smtpAuth', 'unknown'))).slice(before);
      return all.some((e) => e.type === 'SmtpAuthFailuresSummarized') ? all : null;
    }, WINDOW_MS + 8000);
    const failed = events.filter((e) => e.type === 'SmtpAuthFailed').map((e) => e.data as SmtpAuthFailed);
    expect(failed.map((f) => f.username).sort()).to.deep.equal(['nobody-1', 'nobody-2', 'nobody-3', 'nobody-4']);
    const summary = events.filter((e) => e.type === 'SmtpAuthFailuresSummarized').map((e) => e.data as SmtpAuthFailuresSummarized);
    expect(summary).to.have.length(1);
    expect(summary[0]).to.deep.include({ remoteAddress: '127.0.0.1', failures: 2, limit: 4, windowSeconds: WINDOW_MS / 1000 });
  });
});

describe('SMTP junk command limit set by SMTP_JUNK_COMMAND_LIMIT (int)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;
  before(async () => {
    h = await startSmtpHarness({ env: { SMTP_JUNK_COMMAND_LIMIT: '4', SMTP_HARD_ERROR_LIMIT: '2', SMTP_ERROR_SLEEP_MS: '0' } });
  });
  after(async () => {
    await h?.close();
  });

  const expectClosedForErrors = async (c: RawClient) => {
    expect(await c.reply()).to.equal('421 4.7.0 localhost Error: too many errors');
    expect(await c.closedWithin(2000)).to.equal(true);
  };

  it('SMTP_JUNK_COMMAND_LIMIT=4: two EHLOs and two NOOPs are fine, the 3rd and 4th NOOP are errors and the 4th closes the session', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    for (let i = 0; i < 3; i++) expect(await c.command('NOOP')).to.equal('250 2.0.0 OK');
    expect(c.closed).to.equal(false);
    expect(await c.command('NOOP')).to.equal('250 2.0.0 OK');
    await expectClosedForErrors(c);
  });

  it('a transaction restarted by EHLO or HELO (which resets its RCPT TO count) is bounded by the junk limit: MAIL FROM, RCPT TO, EHLO repeated is closed at the 4th round', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    const round = async (greeting: string) => {
      expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
      expect(await c.command('RCPT TO:<user@rcpt.test>')).to.match(/^250 /);
      return c.command(greeting);
    };
    expect(await round('EHLO client.test')).to.match(/^250-/); // junk 3
    expect(await round('HELO client.test')).to.match(/^250 /); // junk 4
    expect(await round('EHLO client.test')).to.match(/^250-/); // error 1
    expect(c.closed).to.equal(false);
    expect(await round('HELO client.test')).to.match(/^250 /); // error 2
    await expectClosedForErrors(c);
  });

  it('a line of an AUTH exchange that reads NOOP is no junk command', async () => {
    const b = await h.newBlock();
    const c = await rawTlsSession(h); // two EHLOs: junk 2
    expect(await c.command('AUTH PLAIN')).to.match(/^334/);
    // Read as the credentials (base64 of no authzid/authcid/password triple): refused, error 1.
    expect(await c.command('NOOP')).to.match(/^501 /);
    expect(await c.authPlain(b.smtpUsername, b.smtpPassword)).to.match(/^235 /);
    // Junk 3 and 4. Had the AUTH line counted, the second would be error 2 and close the session.
    for (let i = 0; i < 2; i++) expect(await c.command('NOOP')).to.equal('250 2.0.0 OK');
    expect(await c.command('NOOP')).to.equal('250 2.0.0 OK'); // error 2
    await expectClosedForErrors(c);
  });
});

/**
 * Limits that need room under the hard error limit: SMTP_HARD_ERROR_LIMIT 12 (above smtp-server's
 * own 10 unrecognized commands), no error sleep. RCPT TO commands per transaction:
 * SMTP_MAX_RECIPIENTS 3 + SMTP_RECIPIENT_OVERSHOOT_LIMIT 4 = 7.
 */
describe('SMTP session limits with room under the hard error limit (int)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;
  // The RCPT TO hook's recipient check starts with the block's directory entry: its lookups are
  // counted on the listener's own DirectoryCache (real queries, TTL 0 in tests; only counted here).
  const lookups = new Map<string, number>();
  const lookupsOf = (motorBlockId: string) => lookups.get(motorBlockId) ?? 0;
  before(async () => {
    h = await startSmtpHarness({
      env: {
        SMTP_HARD_ERROR_LIMIT: '12', SMTP_SOFT_ERROR_LIMIT: '12', SMTP_ERROR_SLEEP_MS: '0',
        SMTP_MAX_RECIPIENTS: '3', SMTP_RECIPIENT_OVERSHOOT_LIMIT: '4',
      },
    });
    const directory = h.motor.rt.directory;
    const block = directory.block;
    (directory as { block: typeof block }).block = (id: string) => {
      lookups.set(id, (lookups.get(id) ?? 0) + 1);
      return block(id);
    };
  });
  after(async () => {
    await h?.close();
  });

  const rcpt = async (c: RawClient, addresses: string[], reply: RegExp) => {
    for (const a of addresses) expect(await c.command(`RCPT TO:<${a}@rcpt.test>`), a).to.match(reply);
  };
  /** A transaction that uses up its 7 RCPT TO commands on one address: the 8th is refused unrun. */
  const fillTransaction = async (c: RawClient, domain: string, address: string) => {
    expect(await c.command(`MAIL FROM:<app@${domain}>`)).to.match(/^250 /);
    await rcpt(c, Array.from({ length: 7 }, () => address), /^250 /);
    await rcpt(c, [address], /^452 4\.5\.3 /);
  };
  const data = async (c: RawClient, from: string, subject: string) => {
    expect(await c.command('DATA')).to.match(/^354 /);
    const r = await c.command(`${rfc822({ from, to: 'dup-a@rcpt.test', subject })}.`);
    expect(r).to.match(/^250 2\.6\.0 /);
    return /queued as ([0-9a-f-]{36})/.exec(r!)![1];
  };
  const acceptedTo = async (messageId: string) => ((await h.motor.rt.store.readStream(streamName('message', messageId)))[0].data as MessageAccepted).to;

  it('an address repeated within the 7 RCPT TO commands is 250 each time (one lookup each) and a recipient once', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
    const before = lookupsOf(b.motorBlockId);
    await rcpt(c, ['dup-a', 'dup-a', 'dup-b', 'DUP-A', 'dup-b', 'dup-a', 'dup-a'], /^250 2\.1\.5 /);
    expect(lookupsOf(b.motorBlockId) - before).to.equal(7);
    const id = await data(c, `app@${b.domain}`, 'within the bound');
    expect(await acceptedTo(id)).to.deep.equal(['dup-a@rcpt.test', 'dup-b@rcpt.test']);
    const received = await eventually(async () => {
      const list = h.mx.messages.filter((m) => m.raw.toString().includes('Subject: within the bound'));
      return list.flatMap((m) => m.envelope.rcptTo).length >= 2 ? list : null;
    }, 20_000);
    expect(received.flatMap((m) => m.envelope.rcptTo).sort()).to.deep.equal(['dup-a@rcpt.test', 'dup-b@rcpt.test']);
    c.end();
  });

  it('past 7 RCPT TO commands: 452 4.5.3 without a lookup, duplicate or not; the transaction goes on, and RSET or a message starts the count again', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
    const before = lookupsOf(b.motorBlockId);
    await rcpt(c, ['dup-a', 'dup-a', 'dup-a', 'dup-b', 'dup-a', 'dup-a', 'dup-a'], /^250 /);
    expect(lookupsOf(b.motorBlockId) - before).to.equal(7);
    await rcpt(c, ['dup-a', 'dup-c', 'dup-b'], /^452 4\.5\.3 /);
    expect(lookupsOf(b.motorBlockId) - before).to.equal(7);
    // The recipients accepted before stay the transaction's.
    const id = await data(c, `app@${b.domain}`, 'past the bound');
    expect(await acceptedTo(id)).to.deep.equal(['dup-a@rcpt.test', 'dup-b@rcpt.test']);

    // After the message, a new transaction: 7 more commands. (Delivery may read the block now: no lookup counts from here.)
    await fillTransaction(c, b.domain, 'dup-c');
    // After RSET, another.
    expect(await c.command('RSET')).to.match(/^250 /);
    await fillTransaction(c, b.domain, 'dup-c');
    c.end();
  });

  it('EHLO and HELO end the transaction, and its RCPT TO count with it: 7 more commands after each', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    for (const greeting of ['EHLO client.test', 'HELO client.test']) {
      await fillTransaction(c, b.domain, 'dup-a');
      expect(await c.command(greeting)).to.match(/^250[- ]/);
    }
    await fillTransaction(c, b.domain, 'dup-a');
    c.end();
  });

  it('each RCPT TO past the 7 is an error (452 to too many distinct recipients is none): the 12th closes the session, still without a lookup', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250 /);
    const before = lookupsOf(b.motorBlockId);
    await rcpt(c, ['r1', 'r2', 'r3'], /^250 /);
    // Past SMTP_MAX_RECIPIENTS, as before: 452 4.5.3 to a new address, no lookup, no error.
    await rcpt(c, ['r4', 'r5', 'r6', 'r7'], /^452 4\.5\.3 /);
    await rcpt(c, Array.from({ length: 11 }, (_, i) => `x${i}`), /^452 4\.5\.3 /); // errors 1 to 11
    expect(c.closed).to.equal(false);
    expect(await c.command('RCPT TO:<r1@rcpt.test>')).to.match(/^452 4\.5\.3 /); // error 12
    expect(await c.reply()).to.equal('421 4.7.0 localhost Error: too many errors');
    expect(await c.closedWithin(2000)).to.equal(true);
    expect(lookupsOf(b.motorBlockId) - before).to.equal(3);
  });

  it('WIZ, SHELL and KILL are unrecognized commands to smtp-server as well: with them the 10th unrecognized command closes the session', async () => {
    const b = await h.newBlock();
    const c = await rawSession(h, b);
    for (let i = 0; i < 9; i++) expect(await c.command(i % 2 ? 'KILL' : 'SHELL')).to.match(/^500 5\.5\.2 /);
    // Nine errors, under the hard limit: this 421 is smtp-server's limit of 10 unrecognized commands.
    expect(await c.command('WIZ sesame')).to.match(/^421 /);
    expect(await c.closedWithin(2000)).to.equal(true);
  });
});
