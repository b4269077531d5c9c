import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import type { SmtpAuthFailed } from '../../domain/events';
import { eventually } from '../support/motor';
import { RawClient, rfc822, startSmtpHarness, type SmtpHarness } from './harness';

/**
 * Hostile input on an authenticated submission session: odd MAIL FROM / RCPT TO forms and
 * parameters, commands out of order, broken AUTH, and messages whose headers are malformed,
 * oversized or encoded in ways that decode badly. Each must get a definite SMTP reply that is not
 * the internal-error one (451 4.3.0, which means an exception escaped), and the listener must go on
 * accepting normal mail afterwards.
 */
describe('SMTP hostile input: a definite reply, never an internal error (int)', function () {
  this.timeout(120_000);
  let h: SmtpHarness;
  let block: Awaited<ReturnType<SmtpHarness['newBlock']>>;
  let from: string;

  before(async () => {
    // 1 MiB: room for a header section over its own 256 KiB limit.
    h = await startSmtpHarness({ env: { SMTP_MAX_MESSAGE_BYTES: '1048576', SMTP_MAX_RECIPIENTS: '5' } });
    block = await h.newBlock();
    from = `app@${block.domain}`;
  });
  after(async () => { await h?.close(); });

  async function session(): Promise<RawClient> {
    const c = await RawClient.connect(h.securePort, true, h.ca);
    expect(await c.reply()).to.match(/^220 /);
    expect(await c.command('EHLO client.test')).to.match(/^250/);
    expect(await c.authPlain(block.smtpUsername, block.smtpPassword)).to.match(/^235/);
    return c;
  }

  const internal = (reply: string | null): boolean => reply !== null && /^451 4\.3\.0/.test(reply);
  const definite = (reply: string | null): boolean => reply !== null && /^[245]\d\d[ -]/.test(reply);

  it('envelope commands: odd addresses, parameters and order', async () => {
    const cases: Array<[string, string[]]> = [
      ['null sender', ['MAIL FROM:<>']],
      ['SIZE not a number', [`MAIL FROM:<${from}> SIZE=abc`]],
      ['SIZE past 2^64', [`MAIL FROM:<${from}> SIZE=99999999999999999999999`]],
      ['unknown BODY', [`MAIL FROM:<${from}> BODY=BOGUS`]],
      ['unknown parameter', [`MAIL FROM:<${from}> X-EVIL=1`]],
      ['no angle brackets', [`MAIL FROM:${from}`]],
      ['control character', [`MAIL FROM:<a\u0001b@${block.domain}>`]],
      ['300-character local part', [`MAIL FROM:<${'l'.repeat(300)}@${block.domain}>`]],
      ['quoted local part with spaces', [`MAIL FROM:<"a b"@${block.domain}>`]],
      ['address literal', ['MAIL FROM:<app@[127.0.0.1]>']],
      ['Latin-1 byte without SMTPUTF8', [`MAIL FROM:<caf\u00e9@${block.domain}>`]],
      ['SMTPUTF8 address', [`MAIL FROM:<café@${block.domain}> SMTPUTF8`]],
      ['AUTH= parameter', [`MAIL FROM:<${from}> AUTH=<>`]],
      ['RCPT before MAIL', ['RCPT TO:<user@rcpt.test>']],
      ['DATA before RCPT', [`MAIL FROM:<${from}>`, 'DATA']],
      ['two @', [`MAIL FROM:<${from}>`, 'RCPT TO:<a@b@rcpt.test>']],
      ['empty recipient', [`MAIL FROM:<${from}>`, 'RCPT TO:<>']],
      ['bare postmaster', [`MAIL FROM:<${from}>`, 'RCPT TO:<postmaster>']],
      ['IP literal recipient', [`MAIL FROM:<${from}>`, 'RCPT TO:<x@[10.0.0.1]>']],
      ['DSN parameters', [`MAIL FROM:<${from}> RET=HDRS ENVID=x`, 'RCPT TO:<user@rcpt.test> NOTIFY=SUCCESS,FAILURE ORCPT=rfc822;user@rcpt.test']],
      ['second MAIL', [`MAIL FROM:<${from}>`, `MAIL FROM:<${from}>`]],
      ['BDAT', [`MAIL FROM:<${from}>`, 'RCPT TO:<user@rcpt.test>', 'BDAT 5 LAST']],
      ['VRFY, EXPN, HELP, NOOP with arguments', ['VRFY root', 'EXPN staff', 'HELP me', 'NOOP hello']],
      ['second AUTH', ['AUTH PLAIN AGFhAGI=']],
      ['unknown command', ['XYZZY']],
      ['empty line', ['']],
    ];
    const failures: string[] = [];
    for (const [name, lines] of cases) {
      const c = await session();
      for (const line of lines) {
        const r = await c.command(line).catch((e: Error) => `no reply: ${e.message}`);
        if (!definite(r) || internal(r)) failures.push(`${name}: ${JSON.stringify(line)} → ${r}`);
        if (c.closed) break;
      }
      c.end();
    }
    expect(failures).to.deep.equal([]);
  });

  it('broken AUTH exchanges', async () => {
    const failures: string[] = [];
    const cases: Array<[string, string[]]> = [
      ['not base64', ['AUTH PLAIN !!!notbase64!!!']],
      ['only NULs', [`AUTH PLAIN ${Buffer.from('\0\0').toString('base64')}`]],
      ['NUL inside the password', [`AUTH PLAIN ${Buffer.from(`\0${block.smtpUsername}\0a\0b`).toString('base64')}`]],
      ['10 KB of base64', [`AUTH PLAIN ${Buffer.alloc(7000, 1).toString('base64')}`]],
      ['unknown mechanism', ['AUTH XOAUTH2 garbage']],
      ['cancelled', ['AUTH PLAIN', '*']],
      ['LOGIN with invalid UTF-8 user', ['AUTH LOGIN', Buffer.from([0xff, 0xfe, 0x41]).toString('base64'), Buffer.from('x').toString('base64')]],
    ];
    for (const [name, lines] of cases) {
      const c = await RawClient.connect(h.securePort, true, h.ca);
      await c.reply();
      await c.command('EHLO client.test');
      for (const line of lines) {
        const r = await c.command(line).catch((e: Error) => `no reply: ${e.message}`);
        if (!(definite(r) || /^334/.test(r ?? '')) || internal(r)) failures.push(`${name}: ${JSON.stringify(line)} → ${r}`);
        if (c.closed) break;
      }
      c.end();
    }
    expect(failures).to.deep.equal([]);
  });

  it('a username whose 128th UTF-16 unit is half a surrogate pair: refused 535 5.7.8, recorded cut before the pair, and counted', async () => {
    // SmtpAuthFailed keeps the first 128 units of the username; cut inside 😀, the event held an
    // unpaired surrogate, which the store refuses: the AUTH was answered 454 4.7.0, logged as an
    // error, and neither recorded nor counted by the failed-login limiter. (Found by fuzz.int.test.ts.)
    const username = `${'u'.repeat(127)}😀tail`;
    const c = await RawClient.connect(h.securePort, true, h.ca, '127.0.0.9');
    expect(await c.reply()).to.match(/^220 /);
    expect(await c.command('EHLO client.test')).to.match(/^250/);
    expect(await c.authPlain(username, 'whatever')).to.match(/^535 5\.7\.8 /);
    expect(await c.command(`AUTH LOGIN ${Buffer.from(username).toString('base64')}`)).to.match(/^334 /);
    expect(await c.command(Buffer.from('whatever').toString('base64'))).to.match(/^535 5\.7\.8 /);
    c.end();
    const recorded = (await h.motor.rt.store.readStream(streamName('smtpAuth', 'unknown')))
      .map((e) => e.data as SmtpAuthFailed).filter((f) => f.remoteAddress === '127.0.0.9');
    expect(recorded.map((f) => [f.mechanism, f.username])).to.deep.equal([['PLAIN', 'u'.repeat(127)], ['LOGIN', 'u'.repeat(127)]]);
    expect(await h.motor.rt.smtpAuthLimiter.addressFailures('127.0.0.9')).to.equal(2);
  });

  it('a client that hangs up while its AUTH or MAIL FROM is being checked leaves no session state behind', async () => {
    // The hooks' verdicts come after the connection is gone (Redis, the directory, the store), and
    // wrote the session's failed-AUTH count and recipient ceiling back after onClose had deleted
    // them: an entry a session, for ever. Ten sessions of each.
    const held = () => h.smtp.smtp!.sessionsHeld();
    expect(held()).to.equal(0);
    for (let i = 0; i < 10; i++) {
      const c = await RawClient.connect(h.securePort, true, h.ca, `127.0.5.${i + 1}`);
      expect(await c.reply()).to.match(/^220 /);
      expect(await c.command('EHLO client.test')).to.match(/^250/);
      c.write(`AUTH PLAIN ${Buffer.from(`\0nobody-${i}\0wrong`).toString('base64')}\r\n`);
      c.end();
    }
    for (let i = 0; i < 10; i++) {
      const c = await session();
      c.write(`MAIL FROM:<${from}>\r\n`);
      c.end();
    }
    // Long enough for every hook to answer (to nobody).
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(held()).to.equal(0);
  });

  it('LHLO (LMTP\'s EHLO) is an unknown command like any other: 500 5.5.2, with its enhanced status code', async () => {
    // smtp-server left the enhanced code out of any reply to a command named LHLO, as for EHLO,
    // though RFC 2034 exempts only HELO and EHLO. (Found by fuzz.int.test.ts.)
    const c = await RawClient.connect(h.securePort, true, h.ca);
    expect(await c.reply()).to.match(/^220 /);
    expect(await c.command('EHLO client.test')).to.include('ENHANCEDSTATUSCODES');
    for (const line of ['LHLO client.test', 'lhlo client.test', 'LHLO', 'XYZZY']) expect(await c.command(line), line).to.match(/^500 5\.5\.2 /);
    c.end();
  });

  it('messages with malformed, oversized or badly encoded headers', async () => {
    const base = { from, to: 'user@rcpt.test' };
    const cases: Array<[string, string]> = [
      ['no From', 'To: user@rcpt.test\r\nSubject: x\r\n\r\nbody\r\n'],
      ['two From headers', rfc822({ ...base, extraHeaders: [`From: other@${block.domain}`] })],
      ['From as a group', rfc822({ ...base, from: `team: ${from}, b@${block.domain};` })],
      ['empty From', rfc822({ ...base, from: '' })],
      ['no header section', '\r\njust a body\r\n'],
      ['a 5,000-character header line', rfc822({ ...base, extraHeaders: [`X-Long: ${'y'.repeat(5000)}`] })],
      ['2,000 headers', rfc822({ ...base, extraHeaders: Array.from({ length: 2000 }, (_, i) => `X-H${i}: v`) })],
      ['unknown charset', rfc822({ ...base, subject: '=?x-unknown-charset?Q?abc?=' })],
      ['UTF-16 encoded-word with half a surrogate pair', rfc822({ ...base, subject: `=?UTF-16LE?B?${Buffer.from([0x3d, 0xd8]).toString('base64')}?=` })],
      ['broken base64 encoded-word', rfc822({ ...base, subject: '=?UTF-8?B?***?=' })],
      ['invalid UTF-8 in a raw header', rfc822({ ...base, subject: '\u00ff\u00fe caf\u00e9' })],
      ['header without a colon', rfc822({ ...base, extraHeaders: ['NoColonHere'] })],
      ['Message-ID of 2,000 characters', rfc822({ ...base, messageId: `${'m'.repeat(2000)}@x` })],
      ['display name of 500 characters', rfc822({ ...base, from: `"${'n'.repeat(500)}" <${from}>` })],
      ['From with comments and routes', rfc822({ ...base, from: `(c) <@route.example:${from}> (more)` })],
    ];
    const failures: string[] = [];
    for (const [name, message] of cases) {
      const c = await session();
      const steps = [`MAIL FROM:<${from}>`, 'RCPT TO:<user@rcpt.test>', 'DATA'];
      let r: string | null = null;
      for (const line of steps) r = await c.command(line);
      if (!/^354/.test(r ?? '')) { failures.push(`${name}: DATA → ${r}`); c.end(); continue; }
      // Sent as bytes of latin1 text: \u00ff is the byte 0xFF, an invalid UTF-8 sequence.
      c.write(Buffer.from(`${message.replace(/^\./gm, '..')}\r\n.\r\n`, 'latin1'));
      r = await c.reply(10_000).catch((e: Error) => `no reply: ${e.message}`);
      if (!definite(r) || internal(r)) failures.push(`${name}: → ${r}`);
      c.end();
    }
    expect(failures).to.deep.equal([]);
  });

  /** MAIL FROM, RCPT TO, DATA, the message (dot-stuffed), and the reply to its end. */
  async function submit(message: string, rcpt = 'user@rcpt.test'): Promise<string | null> {
    const c = await session();
    for (const line of [`MAIL FROM:<${from}>`, `RCPT TO:<${rcpt}>`]) expect(await c.command(line)).to.match(/^250/);
    expect(await c.command('DATA')).to.match(/^354/);
    c.write(`${message.replace(/^\./gm, '..')}\r\n.\r\n`);
    const r = await c.reply(30_000);
    c.end();
    return r;
  }

  it('the header section limits hold whichever field carries them, the last one included: over 256 KiB is 552 5.3.4, the 1,001st field 554 5.6.0, and nothing is delivered', async () => {
    const head = `From: ${from}\r\nTo: big@rcpt.test\r\nSubject: big\r\n`;
    // 400 KB in the last field, folded into lines of 80 characters (the line rule is not what refuses it).
    const folded = `X-Big: ${Array.from({ length: 5000 }, () => 'b'.repeat(80)).join('\r\n ')}\r\n`;
    expect(await submit(`${head}${folded}\r\nbody\r\n`, 'big@rcpt.test')).to.match(/^552 5\.3\.4 /);
    // 300 KB over two fields, the second of them the last one.
    const half = (name: string) => `${name}: ${Array.from({ length: 1900 }, () => 'a'.repeat(80)).join('\r\n ')}\r\n`;
    expect(await submit(`${head}${half('X-A')}${half('X-B')}\r\nbody\r\n`, 'big@rcpt.test')).to.match(/^552 5\.3\.4 /);
    // The same in a message without a body (the header section runs to the end of the data).
    expect(await submit(`${head}${folded}`, 'big@rcpt.test')).to.match(/^552 5\.3\.4 /);
    // 1,000 fields pass; a 1,001st, last, is refused.
    const fields = (n: number) => Array.from({ length: n - 3 }, (_, i) => `X-H${i}: v\r\n`).join('');
    expect(await submit(`${head}${fields(1000)}\r\nbody\r\n`, 'fields@rcpt.test')).to.match(/^250 /);
    expect(await submit(`${head}${fields(1001)}\r\nbody\r\n`, 'big@rcpt.test')).to.match(/^554 5\.6\.0 /);
    await eventually(async () => h.mx.rcptAttempts.includes('fields@rcpt.test') || undefined, 20_000);
    expect(h.mx.rcptAttempts).to.not.include('big@rcpt.test');
  });

  it('a line longer than 998 octets (RFC 5322 2.1.1), in the header or the body, is 554 5.6.0; 998 octets pass', async () => {
    const head = `From: ${from}\r\nTo: long@rcpt.test\r\nSubject: long lines\r\n`;
    const field = (octets: number) => `X-Long: ${'y'.repeat(octets - 'X-Long: '.length)}\r\n`;
    const line = (octets: number) => `${'z'.repeat(octets)}\r\n`;
    // 998 octets, counted in bytes: 996 ASCII characters and one 2-byte character.
    expect(await submit(`${head}${field(998)}\r\n${line(998)}${'z'.repeat(996)}é\r\n`, 'ok-998@rcpt.test')).to.match(/^250 /);
    expect(await submit(`${head}${field(999)}\r\nbody\r\n`, 'long@rcpt.test')).to.match(/^554 5\.6\.0 /);
    // The last field, unfolded: the 400 KB line the limits above would otherwise have to catch.
    expect(await submit(`${head}X-Big: ${'a'.repeat(400 * 1024)}\r\n\r\nbody\r\n`, 'long@rcpt.test')).to.match(/^5\d\d 5\.\d\.\d /);
    expect(await submit(`${head}\r\n${line(10)}${line(999)}`, 'long@rcpt.test')).to.match(/^554 5\.6\.0 /);
    expect(await submit(`${head}\r\n${'z'.repeat(997)}é\r\n`, 'long@rcpt.test')).to.match(/^554 5\.6\.0 /);
    // The accepted one arrives; none of the refused ones does.
    await eventually(async () => h.mx.rcptAttempts.includes('ok-998@rcpt.test') || undefined, 20_000);
    expect(h.mx.rcptAttempts).to.not.include('long@rcpt.test');
  });

  it('still accepts a normal message afterwards', async () => {
    const c = await session();
    for (const line of [`MAIL FROM:<${from}>`, 'RCPT TO:<user@rcpt.test>']) expect(await c.command(line)).to.match(/^250/);
    expect(await c.command('DATA')).to.match(/^354/);
    c.write(`${rfc822({ from, to: 'user@rcpt.test' })}\r\n.\r\n`);
    expect(await c.reply()).to.match(/^250 /);
    c.end();
  });
});
