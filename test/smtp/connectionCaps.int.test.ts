import { connect as netConnect, type Socket } from 'node:net';
import { expect } from 'chai';
import { eventually } from '../support/motor';
import { RawClient, startSmtpHarness, type SmtpHarness } from './harness';

interface LogLine { msg: string; level?: number | string; remoteAddress?: string; port?: string; limit?: number; connections?: number; suppressed?: number }

/**
 * The connections the listener turns away are logged, capped like the other lines a client can
 * multiply (infra/logLimiter.ts), over real sockets: an address over its connection cap (421 4.7.0)
 * and a listener at smtp-server's maxClients (its 421 on the STARTTLS port, a dropped socket before
 * the implicit TLS handshake). 127.0.0.x are other clients (Linux routes 127/8 to loopback).
 */
describe('SMTP connection caps in the log (int)', function () {
  this.timeout(60_000);
  let h: SmtpHarness;
  const lines: string[] = [];
  const WINDOW_SECONDS = 4;
  const open: Array<RawClient | Socket> = [];

  before(async () => {
    h = await startSmtpHarness({
      env: { SMTP_LOG_LINE_LIMIT: '2', SMTP_LOG_LINE_KIND_LIMIT: '100', SMTP_LOG_WINDOW_SECONDS: String(WINDOW_SECONDS) },
      smtp: { maxConnectionsPerAddress: 2, maxClients: 6 },
      logLines: lines,
    });
  });
  afterEach(async () => {
    for (const c of open.splice(0)) (c instanceof RawClient ? c.end() : c.destroy());
    // The listener counts a connection until its close is handled.
    await new Promise((r) => setTimeout(r, 300));
  });
  after(async () => { await h?.close(); });

  const logged = (msg: string): LogLine[] => lines.map((l) => JSON.parse(l) as LogLine).filter((l) => l.msg === msg || l.msg.startsWith(`${msg}: `));
  const greeted = async (from: string, port = h.port) => {
    const c = await RawClient.connect(port, false, undefined, from);
    open.push(c);
    return { c, reply: await c.reply() };
  };

  it('an address over its cap: each 421 logged with the address, 2 in full, then one line counts the rest', async () => {
    for (let i = 0; i < 2; i++) expect((await greeted('127.0.0.9')).reply).to.match(/^220 /);
    // Six connections in all: within the listener's maxClients.
    const refused = await Promise.all(Array.from({ length: 4 }, () => greeted('127.0.0.9')));
    for (const r of refused) expect(r.reply).to.match(/^421 4\.7\.0 Too many connections from your address/);

    const msg = 'SMTP connection refused: too many connections from the address';
    const full = logged(msg).filter((l) => l.suppressed === undefined);
    expect(full).to.have.length(2);
    for (const l of full) expect(l).to.deep.include({ remoteAddress: '127.0.0.9', limit: 2 });
    for (const l of full) expect(l.connections).to.be.within(3, 6);
    const summary = await eventually(async () => logged(msg).find((l) => l.suppressed !== undefined) ?? null, WINDOW_SECONDS * 1000 + 5000);
    expect(summary).to.deep.include({ remoteAddress: '127.0.0.9', suppressed: 2, msg: `${msg}: 2 more suppressed in the last ${WINDOW_SECONDS}s` });
  });

  it('the STARTTLS listener at maxClients: its 421 is logged with the address turned away, as a warning', async () => {
    for (let i = 0; i < 6; i++) expect((await greeted(`127.0.1.${i + 1}`)).reply).to.match(/^220 /);
    const refused = await greeted('127.0.1.9');
    expect(refused.reply).to.match(/^421 .*Too many connected clients/);
    expect(await greeted('127.0.1.9').then((r) => r.reply)).to.match(/^421 /);
    const all = logged('SMTP connection refused: too many clients');
    expect(all, 'none before the listener was full').to.have.length(2);
    for (const l of all) expect(l).to.deep.include({ remoteAddress: '127.0.1.9', port: 'starttls', limit: 6 });
    expect(all[0].level === 40 || all[0].level === 'warn', `level ${all[0].level}`).to.equal(true);
  });

  it('the implicit TLS listener with maxClients handshakes pending: the socket it drops is logged', async () => {
    // Six sockets that never start their handshake hold the listener's pending slots.
    for (let i = 0; i < 6; i++) {
      const s = netConnect({ host: '127.0.0.1', port: h.securePort, localAddress: `127.0.2.${i + 1}` });
      s.on('error', () => {});
      open.push(s);
      await new Promise<void>((resolve) => s.once('connect', () => resolve()));
    }
    await new Promise((r) => setTimeout(r, 200));
    const dropped = netConnect({ host: '127.0.0.1', port: h.securePort, localAddress: '127.0.2.9' });
    dropped.on('error', () => {});
    open.push(dropped);
    await new Promise<void>((resolve) => dropped.once('close', () => resolve()));
    const l = await eventually(async () => logged('SMTP connection refused: too many clients').find((x) => x.port === 'implicit') ?? null, 5000);
    expect(l).to.deep.include({ remoteAddress: '127.0.2.9', limit: 6 });
  });
});
