import { expect } from 'chai';
import { eventually } from '../support/motor';
import { RawClient, rfc822, startSmtpHarness, type SmtpHarness } from './harness';

interface LogLine { msg: string; session?: string; remoteAddress?: string; motorBlockId?: string; seconds?: number; bytes?: number }

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The session's deadlines (smtp/server.ts "DeadlinePolicy"), over real sockets: smtp-server's idle
 * timeout starts again with every byte, so a client that trickles bytes, into a message or into
 * commands, was never cut. Here the DATA deadline is 3 s and the session deadline 6 s, the idle
 * timeout 1.5 s (every client below sends more often than that) and the cap per client address 1,
 * so a slot held shows as the next connection's 421 4.7.0. Each client comes from an address of
 * its own (Linux routes 127/8 to loopback).
 */
describe('SMTP session and DATA deadlines (int)', function () {
  this.timeout(60_000);
  const SESSION_S = 6;
  const DATA_S = 3;
  let h: SmtpHarness;
  let block: Awaited<ReturnType<SmtpHarness['newBlock']>>;
  let other: Awaited<ReturnType<SmtpHarness['newBlock']>>;
  const lines: string[] = [];
  const open: RawClient[] = [];

  before(async () => {
    h = await startSmtpHarness({
      env: { SMTP_SESSION_TIMEOUT_SECONDS: String(SESSION_S), SMTP_DATA_TIMEOUT_SECONDS: String(DATA_S) },
      smtp: { idleTimeoutMs: 1500, maxConnectionsPerAddress: 1 },
      logLines: lines,
    });
    block = await h.newBlock();
    other = await h.newBlock();
  });
  afterEach(() => {
    for (const c of open.splice(0)) c.end();
  });
  after(async () => { await h?.close(); });

  const logged = (msg: string): LogLine[] => lines.map((l) => JSON.parse(l) as LogLine).filter((l) => l.msg === msg);
  const accepted = async (motorBlockId: string): Promise<number> => ((await h.motor.rt.db.raw(
    `select count(*)::int as n from events where type = 'MessageAccepted' and data->>'motorBlockId' = ?`, [motorBlockId],
  )).rows as { n: number }[])[0].n;

  /** An authenticated session from `from`, on implicit TLS or after STARTTLS; `at` is when it connected. */
  async function session(from: string, b = block, o: { starttls?: boolean } = {}): Promise<{ c: RawClient; at: number }> {
    const at = Date.now();
    const c = await RawClient.connect(o.starttls ? h.port : h.securePort, !o.starttls, h.ca, from);
    open.push(c);
    expect(await c.reply()).to.match(/^220 /);
    expect(await c.command('EHLO client.test')).to.match(/^250/);
    if (o.starttls) {
      expect(await c.command('STARTTLS')).to.match(/^220 /);
      await c.startTls(h.ca);
      expect(await c.command('EHLO client.test')).to.match(/^250/);
    }
    expect(await c.authPlain(b.smtpUsername, b.smtpPassword)).to.match(/^235 /);
    return { c, at };
  }

  async function startMessage(c: RawClient, b = block): Promise<void> {
    expect(await c.command(`MAIL FROM:<app@${b.domain}>`)).to.match(/^250/);
    expect(await c.command('RCPT TO:<user@rcpt.test>')).to.match(/^250/);
    expect(await c.command('DATA')).to.match(/^354/);
  }

  /** Writes one byte of `text` every `everyMs` (round and round) until the connection closes or `stop` is called. */
  function trickle(c: RawClient, text: string, everyMs: number): { stop(): void; done: Promise<void> } {
    let stopped = false;
    const done = (async () => {
      for (let i = 0; !stopped && !c.closed; i++) {
        c.write(text[i % text.length]);
        await sleep(everyMs);
      }
    })();
    return { stop: () => { stopped = true; }, done };
  }

  it('a client trickling its message within the idle timeout is cut at the DATA deadline (421 4.4.2), nothing accepted; a client alongside gets its 250', async () => {
    const before = await accepted(block.motorBlockId);
    const { c: slow } = await session('127.0.8.1');
    await startMessage(slow);
    const since354 = Date.now();
    // A header line that never ends: no CRLF.CRLF can come of it, the message can only be cut.
    slow.write(`From: app@${block.domain}\r\nTo: user@rcpt.test\r\nX-Slow: `);
    const t = trickle(slow, 'abcdefgh', 250);
    try {
      // Another client, meanwhile, sends a whole message.
      const { c: fast } = await session('127.0.8.2', other);
      await startMessage(fast, other);
      fast.write(`${rfc822({ from: `app@${other.domain}`, to: 'user@rcpt.test' })}\r\n.\r\n`);
      expect(await fast.reply(10_000)).to.match(/^250 2\.6\.0 /);
      expect(await fast.command('QUIT')).to.match(/^221 /);

      const cut = await slow.reply((DATA_S + 3) * 1000);
      const ms = Date.now() - since354;
      expect(cut).to.match(/^421 4\.4\.2 /);
      expect(ms, 'the DATA deadline, not the session deadline').to.be.within(DATA_S * 1000 - 200, DATA_S * 1000 + 1500);
      expect(await slow.closedWithin(6000)).to.equal(true);
    } finally {
      t.stop();
      await t.done;
    }
    await sleep(500);
    expect(await accepted(block.motorBlockId), 'the cut message').to.equal(before);
    expect(await accepted(other.motorBlockId), 'the client alongside').to.equal(1);
    const line = logged('SMTP session closed: message not received in time').find((l) => l.remoteAddress === '127.0.8.1')!;
    expect(line).to.deep.include({ remoteAddress: '127.0.8.1', motorBlockId: block.motorBlockId, seconds: DATA_S });
    expect(line.bytes).to.be.above(0);
  });

  it('clients trickling commands (NOOP or RSET every second, or one byte of a line that never ends) are cut at the session deadline', async () => {
    const loop = async (from: string, command: string, starttls: boolean) => {
      const { c, at } = await session(from, block, { starttls });
      for (;;) {
        const r = await c.command(command, (SESSION_S + 3) * 1000);
        if (!r?.startsWith('250')) return { reply: r, ms: Date.now() - at, closed: await c.closedWithin(6000) };
        await sleep(1000);
      }
    };
    const byBytes = async (from: string) => {
      const { c, at } = await session(from);
      const t = trickle(c, 'NOO', 500);
      try {
        return { reply: await c.reply((SESSION_S + 3) * 1000), ms: Date.now() - at, closed: await c.closedWithin(6000) };
      } finally {
        t.stop();
        await t.done;
      }
    };
    const cut = await Promise.all([loop('127.0.8.3', 'NOOP', true), loop('127.0.8.4', 'RSET', false), byBytes('127.0.8.5')]);
    for (const r of cut) {
      expect(r.reply).to.match(/^421 4\.4\.2 /);
      expect(r.ms).to.be.within(SESSION_S * 1000 - 200, SESSION_S * 1000 + 1500);
      expect(r.closed).to.equal(true);
    }
    const logs = logged('SMTP session closed: session lasted too long');
    for (const a of ['127.0.8.3', '127.0.8.4', '127.0.8.5']) {
      expect(logs.find((l) => l.remoteAddress === a)).to.deep.include({ motorBlockId: block.motorBlockId, seconds: SESSION_S });
    }
  });

  it('a message still arriving at the session deadline is let finish: its 250, then 421 4.4.2 and the connection closes', async () => {
    const before = await accepted(block.motorBlockId);
    const { c, at } = await session('127.0.8.6');
    // Kept busy under the idle timeout until 1.5 s before the session deadline.
    while (Date.now() - at < SESSION_S * 1000 - 1500) {
      expect(await c.command('NOOP')).to.match(/^250/);
      await sleep(700);
    }
    await startMessage(c);
    const since354 = Date.now();
    c.write(`From: app@${block.domain}\r\nTo: user@rcpt.test\r\nSubject: at the edge\r\n\r\n`);
    // Past the session deadline, inside the DATA deadline: a line every 300 ms.
    while (Date.now() - at < SESSION_S * 1000 + 800) {
      c.write('line\r\n');
      await sleep(300);
    }
    expect(Date.now() - since354, 'inside the DATA deadline').to.be.below(DATA_S * 1000 - 300);
    c.write('.\r\n');
    expect(await c.reply(10_000)).to.match(/^250 2\.6\.0 /);
    // Right behind the 250: well inside the idle timeout (1.5 s), whose own 421 is 4.4.2 too.
    expect(await c.reply(700)).to.match(/^421 4\.4\.2 /);
    expect(await c.closedWithin(6000)).to.equal(true);
    expect(await accepted(block.motorBlockId)).to.equal(before + 1);
    expect(logged('SMTP session closed: session lasted too long').find((l) => l.remoteAddress === '127.0.8.6')).to.not.equal(undefined);
  });

  it('nothing of a cut session outlives it: sessionsHeld() back to 0, and its address may connect again', async () => {
    await eventually(async () => h.smtp.smtp!.sessionsHeld() === 0, 5000);
    const { c } = await session('127.0.8.7');
    await startMessage(c);
    c.write('From: ');
    const t = trickle(c, 'x', 250);
    try {
      expect(h.smtp.smtp!.sessionsHeld()).to.equal(1);
      // The address's one slot is taken while the session lasts.
      const second = await RawClient.connect(h.securePort, true, h.ca, '127.0.8.7');
      open.push(second);
      expect(await second.reply()).to.match(/^421 4\.7\.0 /);
      expect(await c.reply((DATA_S + 3) * 1000)).to.match(/^421 4\.4\.2 /);
      expect(await c.closedWithin(6000)).to.equal(true);
    } finally {
      t.stop();
      await t.done;
    }
    await eventually(async () => h.smtp.smtp!.sessionsHeld() === 0, 5000);
    const again = await RawClient.connect(h.securePort, true, h.ca, '127.0.8.7');
    open.push(again);
    expect(await again.reply()).to.match(/^220 /);
  });
});
