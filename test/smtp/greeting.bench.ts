/**
 * What smtp-server's fixed 100 ms pregreet wait costs a client that opens a connection per
 * session, and what Motor's policy (no wait once the address authenticated) gives back.
 *
 *   npx tsx test/smtp/greeting.bench.ts [seconds]
 *
 * The listener runs in this process; the load comes from a separate process (so client and server
 * do not share an event loop): 20 concurrent sessions on the STARTTLS port, each a new connection
 * doing greeting, EHLO, QUIT (no TLS, so the greeting dominates). Then the greeting wait itself, and
 * whole messages (implicit TLS, AUTH, DATA, commit) with nodemailer, one connection per message.
 */
import { fork } from 'node:child_process';
import { connect } from 'node:net';
import { startRoles } from '../../scripts/runtime';
import { RawClient, rfc822, startSmtpHarness, transport } from './harness';

const SESSIONS = 20;

async function clientLoop(port: number, seconds: number): Promise<number> {
  let n = 0;
  const until = Date.now() + seconds * 1000;
  const one = () => new Promise<void>((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    let buf = '';
    let step = 0;
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      buf += d;
      if (step === 0 && /^220 .*\r\n$/m.test(buf)) { step = 1; buf = ''; s.write('EHLO bench.test\r\n'); }
      else if (step === 1 && /^250 .*\r\n$/m.test(buf)) { step = 2; buf = ''; s.write('QUIT\r\n'); }
      else if (step === 2 && /^221 /m.test(buf)) { step = 3; s.destroy(); resolve(); }
    });
    s.on('error', reject);
    s.on('close', () => (step === 3 ? resolve() : reject(new Error(`closed at step ${step}: ${buf}`))));
  });
  await Promise.all(Array.from({ length: SESSIONS }, async () => {
    while (Date.now() < until) {
      await one();
      n++;
    }
  }));
  return n / seconds;
}

function sessionsPerSecond(port: number, seconds: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = fork(__filename, ['client', String(port), String(seconds)], { execArgv: ['--import', 'tsx'] });
    child.on('message', (m) => resolve(Number(m)));
    child.on('error', reject);
  });
}

async function run(label: string, smtpOpts: { unknownClientDelayMs?: number; knownClientTtlMs?: number }, seconds: number) {
  const h = await startSmtpHarness();
  const b = await h.newBlock();
  await h.motor.setLimits(b.motorBlockId, { burst: 1_000_000, hourly: 10_000_000, daily: 100_000_000 });
  await h.smtp.stop();
  const smtp = await startRoles(h.motor.rt, ['smtp'], { host: '127.0.0.1', smtpPort: 0, smtpsPort: 0, smtp: smtpOpts });
  const l = smtp.smtp!;
  // One successful AUTH makes 127.0.0.1 a known client (for Motor's policy).
  const t = transport({ ...h, port: l.port, securePort: l.securePort }, { user: b.smtpUsername, pass: b.smtpPassword, secure: true });
  await t.verify();
  t.close();

  const rate = await sessionsPerSecond(l.port, seconds);

  const waits: number[] = [];
  for (let i = 0; i < 50; i++) {
    const c = await RawClient.connect(l.port);
    const t0 = process.hrtime.bigint();
    await c.reply();
    waits.push(Number(process.hrtime.bigint() - t0) / 1e6);
    c.end();
  }
  waits.sort((x, y) => x - y);

  let sent = 0;
  const until = Date.now() + seconds * 1000;
  const raw = rfc822({ from: `app@${b.domain}`, to: 'bench@rcpt.test' });
  await Promise.all(Array.from({ length: SESSIONS }, async () => {
    while (Date.now() < until) {
      const tr = transport({ ...h, port: l.port, securePort: l.securePort }, { user: b.smtpUsername, pass: b.smtpPassword, secure: true });
      await tr.sendMail({ envelope: { from: `app@${b.domain}`, to: ['bench@rcpt.test'] }, raw }).then(() => sent++, () => {});
      tr.close();
    }
  }));

  console.log(`${label}: ${rate.toFixed(0)} sessions/s (greeting+EHLO+QUIT, 20 at a time); greeting wait p50 ${waits[25].toFixed(1)} ms; `
    + `${(sent / seconds).toFixed(0)} messages/s (implicit TLS+AUTH+DATA, in-process client)`);
  await smtp.stop();
  await h.motor.close();
  await h.mx.close();
  await h.dns.close();
}

async function main() {
  if (process.argv[2] === 'client') {
    const r = await clientLoop(Number(process.argv[3]), Number(process.argv[4]));
    process.send!(String(r));
    return;
  }
  const seconds = Number(process.argv[2] ?? 5);
  await run('library behaviour (100 ms before every greeting)', { unknownClientDelayMs: 100, knownClientTtlMs: -1 }, seconds);
  await run('Motor (no wait once the address authenticated)', {}, seconds);
}

main().then(() => process.exit(0), (e) => {
  console.error(e);
  process.exit(1);
});
