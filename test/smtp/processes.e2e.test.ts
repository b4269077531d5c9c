import { createServer, type AddressInfo } from 'node:net';
import { expect } from 'chai';
import { startRoles } from '../../scripts/runtime';
import { killOneChild, killUnderLoad, liveChildren as children } from '../support/cluster';
import { eventually } from '../support/motor';
import { RawClient, rawTlsSession, rfc822, startSmtpHarness, transport, type SmtpHarness } from './harness';

/**
 * SMTP_PROCESSES=2: the listeners run in two child processes (node:cluster) sharing the ports.
 * Real children of this test process, real sockets, the real store.
 */
describe('SMTP listener in several processes (SMTP_PROCESSES)', function () {
  this.timeout(90_000);
  let h: SmtpHarness;
  let block: Awaited<ReturnType<SmtpHarness['newBlock']>>;
  const PER_ADDRESS = 10;

  const countAccepted = async (): Promise<number> =>
    (await h.motor.rt.db.raw(`select count(*)::int as n from events where type = 'MessageAccepted' and data->>'source' = 'smtp'`)).rows[0].n;
  const sendOne = async (n: number) => {
    const t = transport(h, { user: block.smtpUsername, pass: block.smtpPassword });
    try {
      return await t.sendMail({ envelope: { from: `app@${block.domain}`, to: ['user@rcpt.test'] }, raw: rfc822({ from: `app@${block.domain}`, to: 'user@rcpt.test', subject: `multi ${n}` }) });
    } finally {
      t.close();
    }
  };
  const greetingMs = async (): Promise<number> => {
    const t = process.hrtime.bigint();
    const c = await RawClient.connect(h.port);
    expect(await c.reply()).to.match(/^220 /);
    c.end();
    return Number(process.hrtime.bigint() - t) / 1e6;
  };

  before(async () => {
    h = await startSmtpHarness({ env: { SMTP_PROCESSES: '2', SMTP_MAX_CONNECTIONS_PER_ADDRESS: String(PER_ADDRESS), LOG_LEVEL: process.env.DBG_LOG ?? 'error' } });
    block = await h.newBlock();
  });
  after(async () => {
    await h?.close();
  });

  it('two children share both ports; every 250 is a committed MessageAccepted and the mail is delivered', async () => {
    expect(h.smtp.smtp!.processes).to.equal(2);
    expect(h.smtp.smtp!.known).to.equal(null);
    expect(children()).to.have.length(2);
    const before = await countAccepted();
    // A new connection per message: the primary deals them out round-robin.
    const infos = await Promise.all(Array.from({ length: 10 }, (_, i) => sendOne(i)));
    for (const info of infos) expect(info.response).to.match(/^250 2\.6\.0 OK: queued as /);
    expect(await countAccepted()).to.equal(before + 10);
    await eventually(async () => (h.mx.messages.filter((m) => m.raw.toString().includes('Subject: multi')).length === 10 ? true : undefined), 30_000);

    const secure = transport(h, { user: block.smtpUsername, pass: block.smtpPassword, secure: true });
    const info = await secure.sendMail({ envelope: { from: `app@${block.domain}`, to: ['user@rcpt.test'] }, raw: rfc822({ from: `app@${block.domain}`, to: 'user@rcpt.test' }) });
    secure.close();
    expect(info.response).to.match(/^250 2\.6\.0 /);
  });

  it('a login in one child spares the address the pregreet wait in the other', async () => {
    // Fresh children (restarted by the previous test or not) may know 127.0.0.1 already; a login
    // makes sure, and then every new connection, whichever child takes it, is greeted at once.
    const c = await rawTlsSession(h);
    expect(await c.authPlain(block.smtpUsername, block.smtpPassword)).to.match(/^235 /);
    c.end();
    await new Promise((r) => setTimeout(r, 200));
    // Round-robin over two children: six connections reach both of them.
    const times = [];
    for (let i = 0; i < 6; i++) times.push(await greetingMs());
    expect(Math.max(...times), `greeting times ${times.map((t) => t.toFixed(0)).join(', ')} ms`).to.be.below(60);
  });

  it('the cap of connections per client address holds across the children, and a dead child\'s connections stop counting', async () => {
    const from = '127.0.0.77';
    const open: RawClient[] = [];
    /** A connection from `from`: its first reply, and the connection kept while it is open. */
    const connect = async (): Promise<string> => {
      const c = await RawClient.connect(h.port, false, undefined, from);
      open.push(c);
      return (await c.reply(5000)) ?? '(closed without a reply)';
    };
    try {
      // Dealt out round-robin, each child holds about half of them: a cap per child would let more in.
      for (let i = 0; i < PER_ADDRESS; i++) expect(await connect(), `connection ${i + 1}`).to.match(/^220 /);
      for (let i = 0; i < 3; i++) expect(await connect(), `connection ${PER_ADDRESS + 1 + i}`).to.match(/^421 4\.7\.0 /);
      // One closes: its place is free again, whichever child takes the next.
      open[0].end();
      expect(await open[0].closedWithin(3000)).to.equal(true);
      expect(await eventually(async () => ((await connect()).startsWith('220 ') ? true : undefined), 5000)).to.equal(true);
      // A child killed with its connections: they no longer count, the survivor's still do.
      const { replacementListening } = await killOneChild();
      await replacementListening;
      await eventually(async () => (open.filter((c) => !c.closed).length < PER_ADDRESS ? true : undefined), 5000);
      const alive = open.filter((c) => !c.closed).length;
      expect(alive).to.be.greaterThan(0);
      for (let i = alive; i < PER_ADDRESS; i++) expect(await connect(), `after the kill, connection ${i + 1}`).to.match(/^220 /);
      expect(await connect()).to.match(/^421 4\.7\.0 /);
    } finally {
      for (const c of open) c.end();
    }
  });

  it('a child killed with SIGKILL is replaced, and the other one keeps accepting meanwhile', async () => {
    const { pid, replacementListening } = await killOneChild();
    const info = await sendOne(100);
    expect(info.response).to.match(/^250 2\.6\.0 /);
    expect(await replacementListening).to.equal(h.port);
    expect(children()).to.have.length(2);
    expect(children().map((w) => w.process.pid)).to.not.include(pid);
    const infos = await Promise.all(Array.from({ length: 4 }, (_, i) => sendOne(200 + i)));
    for (const i of infos) expect(i.response).to.match(/^250 2\.6\.0 /);
  });

  it('under load, a child killed with SIGKILL loses no acknowledged message: every 250 has its MessageAccepted', async () => {
    // 8 clients, one message per connection, back to back; nodemailer gives up on a silent
    // connection after 10 s (the greeting) or 20 s (any later reply).
    const r = await killUnderLoad({
      clients: 8, each: 20, store: h.motor.rt.store,
      attempt: async (c, i) => /queued as ([0-9a-f-]{36})/.exec((await sendOne(1000 * (c + 1) + i)).response)?.[1] ?? null,
    });
    expect(r.missing, `${r.missing.length} of ${r.acknowledged.length} acknowledged messages have no event (${r.failed} sessions failed)`).to.deep.equal([]);
  });

  it('a port that is taken fails the start with the reason, and no child is left behind', async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    const port = (taken.address() as AddressInfo).port;
    const before = children().map((w) => w.process.pid);
    try {
      const err = await startRoles(h.motor.rt, ['smtp'], { host: '127.0.0.1', smtpPort: port, smtpsPort: 0 }).then(() => null, (e: Error) => e);
      expect(err?.message).to.match(/could not start: .*EADDRINUSE/);
    } finally {
      taken.close();
    }
    await eventually(async () => (children().length === before.length ? true : undefined), 10_000);
    expect(children().map((w) => w.process.pid)).to.deep.equal(before);
  });

  it('stop drains the children: they exit and the ports close', async () => {
    const pids = children().map((w) => w.process.pid!);
    const t = Date.now();
    await h.smtp.stop();
    expect(Date.now() - t, 'idle children stop at once').to.be.below(10_000);
    expect(children()).to.have.length(0);
    for (const pid of pids) expect(() => process.kill(pid, 0)).to.throw();
    const refused = await RawClient.connect(h.port).then((c) => { c.end(); return false; }, () => true);
    expect(refused).to.equal(true);
  });
});
