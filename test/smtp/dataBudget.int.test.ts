import { expect } from 'chai';
import { startRoles, type StartedRoles } from '../../scripts/runtime';
import { eventually } from '../support/motor';
import { RawClient, rfc822, startSmtpHarness, type SmtpHarness } from './harness';

interface LogLine { msg: string; remoteAddress?: string; motorBlockId?: string; held?: number; limit?: number; declaredSize?: number }

const BUDGET = 600_000;
const MAX_MESSAGE = 409_600;
const DATA_S = 4;
const BOUNCE_DOMAIN = 'bounces.motor.test';

/**
 * The process's budget of message bytes held while they arrive (SMTP_MAX_BUFFERED_BYTES,
 * smtp/dataBudget.ts), over real sockets: 600 KB for messages of at most 400 KB, so two messages
 * of 350 KB at once do not both fit. The budget is the runtime's, shared by the submission
 * listeners and the inbound one started on the same runtime. Each client comes from an address of
 * its own (Linux routes 127/8 to loopback).
 */
describe('SMTP memory budget for messages being received (int)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;
  let inbound: StartedRoles;
  let block: Awaited<ReturnType<SmtpHarness['newBlock']>>;
  const lines: string[] = [];
  const open: RawClient[] = [];

  before(async () => {
    h = await startSmtpHarness({
      env: {
        SMTP_MAX_BUFFERED_BYTES: String(BUDGET), SMTP_MAX_MESSAGE_BYTES: String(MAX_MESSAGE), SMTP_DATA_TIMEOUT_SECONDS: String(DATA_S),
        BOUNCE_DOMAIN, INBOUND_MAX_MESSAGE_BYTES: String(MAX_MESSAGE),
      },
      logLines: lines,
    });
    block = await h.newBlock();
    inbound = await startRoles(h.motor.rt, ['inbound'], { host: '127.0.0.1', inboundPort: 0 });
  });
  afterEach(async () => {
    for (const c of open.splice(0)) c.end();
    // No test leaves bytes behind for the next one.
    await eventually(async () => budget().held === 0, 5000);
  });
  after(async () => {
    await inbound?.stop();
    await h?.close();
  });

  const budget = () => h.motor.rt.smtpDataBudget;
  const logged = (msg: string): LogLine[] => lines.map((l) => JSON.parse(l) as LogLine).filter((l) => l.msg === msg);
  const accepted = async (): Promise<number> => ((await h.motor.rt.db.raw(
    `select count(*)::int as n from events where type = 'MessageAccepted' and data->>'motorBlockId' = ?`, [block.motorBlockId],
  )).rows as { n: number }[])[0].n;
  const metric = async (name: string): Promise<string> => (await h.motor.rt.metrics.registry.getSingleMetricAsString(name));

  /** A message of about `bytes` (lines of 78 octets), its final dot included. */
  const message = (bytes: number): string => {
    const head = rfc822({ from: `app@${block.domain}`, to: 'user@rcpt.test', body: '' });
    const line = `${'x'.repeat(76)}\r\n`;
    return `${head}${line.repeat(Math.ceil((bytes - head.length) / line.length))}.\r\n`;
  };

  /** An authenticated session on implicit TLS from `from`. */
  async function session(from: string): Promise<RawClient> {
    const c = await RawClient.connect(h.securePort, true, h.ca, from);
    open.push(c);
    expect(await c.reply()).to.match(/^220 /);
    expect(await c.command('EHLO client.test')).to.match(/^250/);
    expect(await c.authPlain(block.smtpUsername, block.smtpPassword)).to.match(/^235 /);
    return c;
  }

  async function startMessage(c: RawClient, mailFrom = `MAIL FROM:<app@${block.domain}>`): Promise<void> {
    expect(await c.command(mailFrom)).to.match(/^250/);
    expect(await c.command('RCPT TO:<user@rcpt.test>')).to.match(/^250/);
    expect(await c.command('DATA')).to.match(/^354/);
  }

  it('two messages of 350 KB at once under a 600 KB budget: one 250, the other 452 4.3.1 and nothing stored; the refused client retries in the same session and gets 250', async () => {
    const before = await accepted();
    const [a, b] = [await session('127.0.9.1'), await session('127.0.9.2')];
    await startMessage(a);
    await startMessage(b);
    const m = message(350_000);
    const half = 200_000;
    // Both messages in flight at once: 400 KB held, and 300 KB of them still to come.
    a.write(m.slice(0, half));
    b.write(m.slice(0, half));
    await eventually(async () => budget().held >= 2 * half - 2000, 10_000);
    a.write(m.slice(half));
    b.write(m.slice(half));
    const replies = await Promise.all([a.reply(20_000), b.reply(20_000)]);
    const ok = replies.filter((r) => /^250 2\.6\.0 /.test(r ?? ''));
    const refused = replies.filter((r) => /^452 4\.3\.1 /.test(r ?? ''));
    expect(ok, JSON.stringify(replies)).to.have.length(1);
    expect(refused, JSON.stringify(replies)).to.have.length(1);
    await eventually(async () => budget().held === 0, 5000);
    expect(await accepted()).to.equal(before + 1);

    // The session stays usable: the refused client sends the message again, now with room for it.
    const retry = replies[0]!.startsWith('452') ? a : b;
    await startMessage(retry);
    retry.write(m);
    expect(await retry.reply(20_000)).to.match(/^250 2\.6\.0 /);
    expect(await accepted()).to.equal(before + 2);
    expect(budget().held).to.equal(0);

    expect(await metric('motor_smtp_buffer_refusals_total')).to.match(/motor_smtp_buffer_refusals_total\{listener="submission",stage="data"\} 1\b/);
    expect(await metric('motor_smtp_buffered_bytes')).to.match(/motor_smtp_buffered_bytes 0\b/);
    const line = logged('SMTP message refused: SMTP_MAX_BUFFERED_BYTES reached').at(-1)!;
    expect(line).to.deep.include({ motorBlockId: block.motorBlockId, limit: BUDGET });
    expect(['127.0.9.1', '127.0.9.2']).to.include(line.remoteAddress);
  });

  it('a declared SIZE= that does not fit now is 452 4.3.1 at MAIL FROM; once the bytes are given back it is taken', async () => {
    const holder = await session('127.0.9.3');
    await startMessage(holder);
    const m = message(350_000);
    holder.write(m.slice(0, 300_000));
    await eventually(async () => budget().held >= 298_000, 10_000);
    const c = await session('127.0.9.4');
    expect(await c.command(`MAIL FROM:<app@${block.domain}> SIZE=350000`)).to.match(/^452 4\.3\.1 /);
    // What fits now is taken (and over SMTP_MAX_MESSAGE_BYTES stays the library's 552).
    expect(await c.command(`MAIL FROM:<app@${block.domain}> SIZE=${MAX_MESSAGE + 1}`)).to.match(/^552 /);
    expect(await c.command(`MAIL FROM:<app@${block.domain}> SIZE=250000`)).to.match(/^250 /);
    expect(await c.command('RSET')).to.match(/^250 /);
    holder.write(m.slice(300_000));
    expect(await holder.reply(20_000)).to.match(/^250 2\.6\.0 /);
    await startMessage(c, `MAIL FROM:<app@${block.domain}> SIZE=350000`);
    c.write(m);
    expect(await c.reply(20_000)).to.match(/^250 2\.6\.0 /);
    expect(logged('SMTP message refused: SMTP_MAX_BUFFERED_BYTES reached').find((l) => l.remoteAddress === '127.0.9.4')).to.deep.include({ declaredSize: 350_000 });
  });

  it('a client that goes away in the middle of its message gives its bytes back', async () => {
    const c = await session('127.0.9.5');
    await startMessage(c);
    c.write(message(350_000).slice(0, 300_000));
    await eventually(async () => budget().held >= 298_000, 10_000);
    c.end();
    await eventually(async () => budget().held === 0, 5000);
  });

  it('a message cut at the DATA deadline gives its bytes back', async () => {
    const c = await session('127.0.9.6');
    await startMessage(c);
    c.write(message(350_000).slice(0, 300_000));
    await eventually(async () => budget().held >= 298_000, 10_000);
    expect(await c.reply((DATA_S + 3) * 1000)).to.match(/^421 4\.4\.2 /);
    await eventually(async () => budget().held === 0, 5000);
  });

  it('the inbound listener takes from the same budget: a report that does not fit while a submission holds 350 KB is 452 4.3.1, and taken once it does', async () => {
    const holder = await session('127.0.9.7');
    await startMessage(holder);
    const m = message(350_000);
    holder.write(m.slice(0, 349_000));
    await eventually(async () => budget().held >= 347_000, 10_000);

    const report = `From: mailer-daemon@isp.test\r\nTo: fbl@${BOUNCE_DOMAIN}\r\nSubject: not a report\r\n\r\n${`${'y'.repeat(76)}\r\n`.repeat(3500)}.\r\n`;
    const mx = await RawClient.connect(inbound.inbound!.port, false, undefined, '127.0.9.8');
    open.push(mx);
    expect(await mx.reply()).to.match(/^220 /);
    expect(await mx.command('EHLO mx.isp.test')).to.match(/^250/);
    expect(await mx.command('MAIL FROM:<> SIZE=300000')).to.match(/^452 4\.3\.1 /);
    expect(await mx.command('MAIL FROM:<>')).to.match(/^250 /);
    expect(await mx.command(`RCPT TO:<fbl@${BOUNCE_DOMAIN}>`)).to.match(/^250 /);
    expect(await mx.command('DATA')).to.match(/^354/);
    mx.write(report);
    expect(await mx.reply(20_000)).to.match(/^452 4\.3\.1 /);

    holder.write(m.slice(349_000));
    expect(await holder.reply(20_000)).to.match(/^250 2\.6\.0 /);
    expect(await mx.command('MAIL FROM:<>')).to.match(/^250 /);
    expect(await mx.command(`RCPT TO:<fbl@${BOUNCE_DOMAIN}>`)).to.match(/^250 /);
    expect(await mx.command('DATA')).to.match(/^354/);
    mx.write(report);
    expect(await mx.reply(20_000)).to.match(/^250 /);
    expect(await metric('motor_smtp_buffer_refusals_total')).to.match(/listener="inbound",stage="data"\} 1\b/).and.to.match(/listener="inbound",stage="mail_from"\} 1\b/);
  });
});
