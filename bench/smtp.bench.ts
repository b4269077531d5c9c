/**
 * bench:smtp — messages/s accepted over SMTP by Motor's submission listener (20 parallel sessions,
 * 1 KB and 20 KB messages, STARTTLS + AUTH PLAIN, each message's MessageAccepted committed before
 * the 250) next to Debian's Postfix accepting the same load into its queue on the same machine, in
 * the same run.
 *
 * Postfix: a throwaway instance (own config, queue and data directories under a temporary
 * directory, smtpd on a loopback port, STARTTLS offered with the same certificate as Motor, every
 * message put on HOLD by an access rule so it stays in the queue and nothing is delivered; stopped
 * and removed afterwards). Postfix fsyncs each queue file before its 250, as Motor commits before
 * its own: both replies mean "persisted".
 *
 * Clients:
 *   - Postfix's own `smtp-source` (-s 20 -m N -l SIZE; with -d: several messages per connection).
 *     It speaks neither STARTTLS nor AUTH, so it cannot drive Motor (AUTH only after TLS).
 *   - The same small Node client for both servers (this file, `smtpLoad`): 20 sessions, STARTTLS,
 *     AUTH PLAIN where the server requires it (Motor; this Postfix has no SASL), no PIPELINING
 *     (as smtp-source), either all of a session's messages over one connection ("session") or a
 *     new connection per message ("connection", as smtp-source without -d).
 * The headline ratio is Motor / Postfix with the same Node client, same TLS, same mode.
 *
 * Needs root (Postfix's master runs as root) and the Debian package postfix:
 *   DEBIAN_FRONTEND=noninteractive apt-get install -y postfix   (answer "No configuration")
 *
 * Settings (env or --arg=value):
 *   SMTP_MESSAGES / --messages   messages per measured run (default 5000: a 2,000-message run lasted about a second)
 *   SMTP_SESSIONS / --sessions   parallel sessions (default 20)
 *   SMTP_SIZES / --sizes         body sizes in bytes, comma-separated (default 1024,20480)
 *   SMTP_WARMUP / --warmup       messages of the warm-up run of each server before each size's rounds (default 500)
 *   SMTP_MODES / --modes         session,connection (default both)
 *   SMTP_PROCESSES / --processes Motor's SMTP listener processes (default 1, Motor's default; on
 *                                this 2-core machine 2 did not beat 1, see docs/PERFORMANCE.md)
 *   SMTP_ROUNDS / --rounds       measured rounds per size × mode (default 3): each round runs
 *                                smtp-source → Postfix, then the Node client against Postfix and
 *                                Motor in alternating order; the table shows each figure's median
 *                                and the median of the rounds' Motor/Postfix ratios
 *
 * Postfix's hold queue keeps everything of the run, as Motor's store does. Emptying it before each
 * Postfix run (postsuper -d ALL hold) was tried and made Postfix about half as fast (the deletions'
 * I/O lands on the next run's fsyncs), so it is not done.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, chownSync, chmodSync, openSync, closeSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { fmt, intSetting, machine, onCleanup, runBench, setting, sleep, spawnChild, table } from './lib/common';
import { benchEnv, createFixture, motorChildEnv } from './lib/fixture';
import { freePort } from './lib/postfixSink';
import { loadTlsMaterial } from '../smtp/tls';

const MESSAGES = intSetting('SMTP_MESSAGES', 'messages', 5000);
const SESSIONS = intSetting('SMTP_SESSIONS', 'sessions', 20);
const WARMUP = intSetting('SMTP_WARMUP', 'warmup', 500);
const SIZES = setting('SMTP_SIZES', 'sizes', '1024,20480').split(',').map((s) => Number(s.trim())).filter((n) => n > 0);
const MODES = setting('SMTP_MODES', 'modes', 'session,connection').split(',').map((s) => s.trim()) as Mode[];
const ROUNDS = Math.max(1, intSetting('SMTP_ROUNDS', 'rounds', 3));
const PROCESSES = intSetting('SMTP_PROCESSES', 'processes', 1);
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
type Mode = 'session' | 'connection';

const POSTFIX = '/usr/sbin/postfix';
const SMTP_SOURCE = ['/usr/sbin/smtp-source', '/usr/bin/smtp-source'].find((p) => existsSync(p)) ?? null;

function requirements(): string[] {
  const missing: string[] = [];
  if (!existsSync(POSTFIX) || !SMTP_SOURCE) missing.push('Postfix and smtp-source: DEBIAN_FRONTEND=noninteractive apt-get install -y postfix (choose "No configuration")');
  try { execFileSync('openssl', ['version'], { stdio: 'ignore' }); } catch { missing.push('openssl: apt-get install -y openssl'); }
  if (process.getuid?.() !== 0) missing.push('root: Postfix\'s master must be started as root');
  return missing;
}


async function waitForPort(port: number, what: string, proc?: ChildProcess): Promise<void> {
  for (let i = 0; ; i++) {
    if (proc && proc.exitCode !== null) throw new Error(`${what} exited (${proc.exitCode})`);
    const ok = await new Promise<boolean>((resolve) => {
      const c = netConnect(port, '127.0.0.1');
      c.once('connect', () => { c.destroy(); resolve(true); });
      c.once('error', () => resolve(false));
    });
    if (ok) return;
    if (i > 200) throw new Error(`${what} did not listen on ${port}`);
    await sleep(50);
  }
}

// ------------------------------------------------------------------------------ Postfix

interface PostfixInstance { port: number; dir: string; queued(): number; stop(): Promise<void> }

async function startPostfix(tls: { certPath: string; keyPath: string }): Promise<PostfixInstance> {
  const dir = mkdtempSync(join(tmpdir(), 'motor-bench-postfix-'));
  chmodSync(dir, 0o755); // Postfix's daemons (user postfix) walk into it
  const etc = join(dir, 'etc');
  const queue = join(dir, 'queue');
  const data = join(dir, 'data');
  for (const d of [etc, queue, data]) mkdirSync(d, { recursive: true });
  const postfixUid = Number(execFileSync('id', ['-u', 'postfix']).toString().trim());
  chownSync(data, postfixUid, -1);
  const port = await freePort();
  // Debian's master.cf with its port-25 smtpd replaced by ours; no chroot (nothing is copied into the queue directory).
  const master = readFileSync('/etc/postfix/master.cf', 'utf8').split('\n')
    .map((l) => (/^smtp\s+inet\s/.test(l) ? `127.0.0.1:${port} inet n - n - - smtpd` : l)).join('\n');
  writeFileSync(join(etc, 'master.cf'), master);
  if (existsSync('/etc/postfix/dynamicmaps.cf')) writeFileSync(join(etc, 'dynamicmaps.cf'), readFileSync('/etc/postfix/dynamicmaps.cf'));
  writeFileSync(join(etc, 'main.cf'), [
    'compatibility_level = 3.6',
    `queue_directory = ${queue}`,
    `data_directory = ${data}`,
    'mail_owner = postfix',
    'setgid_group = postdrop',
    'inet_interfaces = 127.0.0.1',
    'inet_protocols = ipv4',
    'myhostname = postfix-bench.localdomain',
    'mydestination =',
    'mynetworks = 127.0.0.0/8',
    'smtpd_relay_restrictions = permit_mynetworks, reject',
    // Every message goes to the hold queue: accepted and persisted, never delivered.
    'smtpd_recipient_restrictions = check_client_access static:HOLD, permit_mynetworks, reject',
    `smtpd_tls_cert_file = ${tls.certPath}`,
    `smtpd_tls_key_file = ${tls.keyPath}`,
    'smtpd_tls_security_level = may',
    'smtpd_tls_mandatory_protocols = >=TLSv1.2',
    'default_process_limit = 200',
    'message_size_limit = 10485760',
    'maillog_file = /dev/stdout',
    '',
  ].join('\n'));
  execFileSync('postconf', ['-c', etc, '-F', '*/*/chroot = n']);
  // start-fg: the master stays our child; `postfix stop` ends it. Its log (maillog_file = /dev/stdout)
  // goes to a regular file: Postfix cannot open /dev/stdout when it is a socket, as Node's pipes are.
  const logPath = join(dir, 'maillog');
  const logFd = openSync(logPath, 'a');
  const proc = spawn(POSTFIX, ['-c', etc, 'start-fg'], { stdio: ['ignore', logFd, logFd] });
  closeSync(logFd);
  const log = () => (existsSync(logPath) ? readFileSync(logPath, 'utf8').slice(-4000) : '');
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    try { execFileSync(POSTFIX, ['-c', etc, 'stop'], { stdio: 'ignore' }); } catch { /* not running */ }
    await Promise.race([new Promise((r) => proc.once('exit', r)), sleep(10_000)]);
    if (proc.exitCode === null) proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  onCleanup('postfix', stop);
  try {
    await waitForPort(port, 'postfix', proc);
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${log()}`);
  }
  const count = (d: string): number => {
    if (!existsSync(d)) return 0;
    let n = 0;
    for (const e of readdirSync(d, { withFileTypes: true })) n += e.isDirectory() ? count(join(d, e.name)) : 1;
    return n;
  };
  return { port, dir, queued: () => count(join(queue, 'hold')), stop };
}

function runSmtpSource(port: number, o: { messages: number; size: number; reuse: boolean; from: string; to: string }): Promise<{ seconds: number }> {
  return new Promise((resolve, reject) => {
    const args = ['-s', String(SESSIONS), '-m', String(o.messages), '-l', String(o.size), '-f', o.from, '-t', o.to, '-M', 'bench.client.test', ...(o.reuse ? ['-d'] : []), `127.0.0.1:${port}`];
    const t = process.hrtime.bigint();
    const p = spawn(SMTP_SOURCE!, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr!.on('data', (d: Buffer) => { err += d.toString(); });
    p.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`smtp-source exited ${code}: ${err}`));
      resolve({ seconds: Number(process.hrtime.bigint() - t) / 1e9 });
    });
  });
}

// ------------------------------------------------------------------------------ the Node client

/** One SMTP conversation, line by line (no PIPELINING). */
class Conversation {
  private buf = '';
  private waiter: (() => void) | null = null;
  private closed = false;

  constructor(public socket: Socket | TLSSocket) { this.attach(socket); }

  private attach(s: Socket | TLSSocket) {
    s.setEncoding('latin1');
    s.on('data', (d: string) => { this.buf += d; this.waiter?.(); });
    s.on('close', () => { this.closed = true; this.waiter?.(); });
    s.on('error', () => { this.closed = true; this.waiter?.(); });
  }

  async reply(): Promise<string> {
    for (;;) {
      const m = /^(?:\d{3}-[^\r\n]*\r\n)*(\d{3})(?: [^\r\n]*)?\r\n/.exec(this.buf);
      if (m) {
        this.buf = this.buf.slice(m[0].length);
        return m[0];
      }
      if (this.closed) throw new Error(`connection closed (buffer: ${JSON.stringify(this.buf.slice(0, 200))})`);
      await new Promise<void>((r) => { this.waiter = () => { this.waiter = null; r(); }; });
    }
  }

  async expect(line: string | Buffer | null, code: string): Promise<string> {
    if (line !== null) this.socket.write(line);
    const r = await this.reply();
    if (!r.startsWith(code)) throw new Error(`expected ${code} after ${typeof line === 'string' ? line.trim().slice(0, 40) : 'data'}, got ${r.trim()}`);
    return r;
  }

  async startTls(): Promise<void> {
    await this.expect('STARTTLS\r\n', '220');
    const raw = this.socket as Socket;
    raw.removeAllListeners('data');
    raw.removeAllListeners('close');
    raw.removeAllListeners('error');
    const s = tlsConnect({ socket: raw, rejectUnauthorized: false, servername: 'localhost' });
    await new Promise<void>((resolve, reject) => { s.once('secureConnect', () => resolve()); s.once('error', reject); });
    this.socket = s;
    this.buf = '';
    this.attach(s);
  }

  end() { this.socket.destroy(); }
}

interface LoadTarget { port: number; auth: { user: string; pass: string } | null; from: string; to: string }

function message(from: string, to: string, size: number, n: number): Buffer {
  const head = [`From: <${from}>`, `To: <${to}>`, `Subject: bench ${n}`, `Message-ID: <bench-${n}-${Math.random().toString(36).slice(2)}@bench.client.test>`, `Date: ${new Date().toUTCString()}`, 'MIME-Version: 1.0', 'Content-Type: text/plain; charset=us-ascii', '', ''].join('\r\n');
  const line = 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd\r\n'; // 78 bytes
  return Buffer.from(`${head}${line.repeat(Math.ceil(size / line.length)).slice(0, size)}\r\n.\r\n`, 'latin1');
}

async function openSession(t: LoadTarget): Promise<Conversation> {
  const socket = netConnect(t.port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => { socket.once('connect', () => resolve()); socket.once('error', reject); });
  const c = new Conversation(socket);
  await c.expect(null, '220');
  await c.expect('EHLO bench.client.test\r\n', '250');
  await c.startTls();
  await c.expect('EHLO bench.client.test\r\n', '250');
  if (t.auth) await c.expect(`AUTH PLAIN ${Buffer.from(`\0${t.auth.user}\0${t.auth.pass}`).toString('base64')}\r\n`, '235');
  return c;
}

async function sendOne(c: Conversation, t: LoadTarget, body: Buffer): Promise<void> {
  await c.expect(`MAIL FROM:<${t.from}>\r\n`, '250');
  await c.expect(`RCPT TO:<${t.to}>\r\n`, '250');
  await c.expect('DATA\r\n', '354');
  await c.expect(body, '250');
}

/** `messages` over `SESSIONS` parallel sessions; returns the wall time and the 250s counted. */
async function smtpLoad(t: LoadTarget, o: { messages: number; size: number; mode: Mode }): Promise<{ seconds: number; accepted: number }> {
  const bodies = Array.from({ length: 50 }, (_, i) => message(t.from, t.to, o.size, i));
  let next = 0;
  let accepted = 0;
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: SESSIONS }, async () => {
    let c: Conversation | null = null;
    while (next < o.messages) {
      const n = next++;
      if (!c) c = await openSession(t);
      await sendOne(c, t, bodies[n % bodies.length]);
      accepted++;
      if (o.mode === 'connection') { await c.expect('QUIT\r\n', '221').catch(() => undefined); c.end(); c = null; }
    }
    if (c) { await c.expect('QUIT\r\n', '221').catch(() => undefined); c.end(); }
  }));
  return { seconds: Number(process.hrtime.bigint() - start) / 1e9, accepted };
}

// ------------------------------------------------------------------------------ main

const missing = requirements();
if (missing.length > 0) {
  console.error(`bench:smtp cannot run; missing:\n  - ${missing.join('\n  - ')}\n(see docs/PERFORMANCE.md, "SMTP submission")`);
  process.exit(2);
}

runBench('bench:smtp', 900 * ROUNDS, async () => {
  console.log(`bench:smtp — ${machine()}`);
  console.log(`${MESSAGES} messages per run, ${SESSIONS} parallel sessions, sizes ${SIZES.join(', ')} bytes, modes ${MODES.join(', ')}, Motor SMTP_PROCESSES=${PROCESSES}; load average at start ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);

  const certDir = mkdtempSync(join(tmpdir(), 'motor-bench-smtp-cert-'));
  onCleanup('certificate', () => rmSync(certDir, { recursive: true, force: true }));
  await loadTlsMaterial({ certPath: null, keyPath: null, dataDir: certDir, hostname: 'localhost' });
  const tls = { certPath: join(certDir, 'smtp-tls', 'localhost.cert.pem'), keyPath: join(certDir, 'smtp-tls', 'localhost.key.pem') };

  const f = await createFixture('smtp', benchEnv({ MOTOR_HOSTNAME: 'localhost' }));
  const from = `app@${f.senderDomain}`;
  const to = 'someone@rcpt.example.test';
  const [smtpPort, smtpsPort] = [await freePort(), await freePort()];
  const motor = spawnChild('motorChild.ts', 'motor-smtp', motorChildEnv(f, ['smtp'], {
    SMTP_PORT: String(smtpPort), SMTPS_PORT: String(smtpsPort), SMTP_TLS_CERT: tls.certPath, SMTP_TLS_KEY: tls.keyPath,
    SMTP_PROCESSES: String(PROCESSES),
  }));
  await motor.next('ready');
  const postfix = await startPostfix(tls);

  const motorTarget: LoadTarget = { port: smtpPort, auth: { user: f.block.smtpUsername, pass: f.block.smtpPassword }, from, to };
  const postfixTarget: LoadTarget = { port: postfix.port, auth: null, from, to };

  let motor250 = 0;
  let postfixQueued = 0;

  const rows: Array<Array<string | number>> = [];
  const ratios: string[] = [];
  for (const size of SIZES) {
    const label = size >= 1024 ? `${Math.round(size / 1024)} KB` : `${size} B`;
    const rate = (r: { seconds: number }) => MESSAGES / r.seconds;
    // Warm-up at this size (JIT of each Motor process, Postfix's smtpd processes, the store's pool)
    // and a check that both accept.
    motor250 += (await smtpLoad(motorTarget, { messages: WARMUP, size, mode: 'session' })).accepted;
    await smtpLoad(postfixTarget, { messages: WARMUP, size, mode: 'session' });
    postfixQueued += WARMUP;
    const load = Number((await import('node:os')).loadavg()[0].toFixed(1));
    for (const mode of MODES) {
      const runs = { source: [] as number[], pfNode: [] as number[], motor: [] as number[], ratio: [] as number[] };
      for (let round = 0; round < ROUNDS; round++) {
        runs.source.push(rate(await runSmtpSource(postfix.port, { messages: MESSAGES, size, reuse: mode === 'session', from, to })));
        postfixQueued += MESSAGES;
        await sleep(500);
        // Alternating order: neither server always runs right after the other's load.
        let pf = 0;
        let mo = 0;
        for (const server of round % 2 === 0 ? ['postfix', 'motor'] : ['motor', 'postfix']) {
          if (server === 'postfix') {
            pf = rate(await smtpLoad(postfixTarget, { messages: MESSAGES, size, mode }));
            postfixQueued += MESSAGES;
          } else {
            const r = await smtpLoad(motorTarget, { messages: MESSAGES, size, mode });
            motor250 += r.accepted;
            mo = rate(r);
          }
          await sleep(500);
        }
        runs.pfNode.push(pf);
        runs.motor.push(mo);
        runs.ratio.push(mo / pf);
        console.log(`${label} ${mode} round ${round + 1}: smtp-source→Postfix ${fmt(runs.source[round])}/s, Node→Postfix ${fmt(pf)}/s, Node→Motor ${fmt(mo)}/s (${fmt(mo / pf, 2)}×)`);
      }
      const modeLabel = mode === 'session' ? 'one connection per session' : 'new connection per message';
      const [source, pfNode, motorRate, ratio] = [median(runs.source), median(runs.pfNode), median(runs.motor), median(runs.ratio)];
      rows.push([`${label}, ${modeLabel}`, 'Postfix ← smtp-source (plaintext, no AUTH)', fmt(source), '']);
      rows.push(['', 'Postfix ← Node client (STARTTLS, no AUTH)', fmt(pfNode), '1.00']);
      rows.push(['', 'Motor ← Node client (STARTTLS + AUTH PLAIN)', fmt(motorRate), fmt(ratio, 2)]);
      ratios.push(`${label}, ${modeLabel} (load ${load}): Motor/Postfix same client = ${fmt(ratio, 2)}× (rounds: ${runs.ratio.map((x) => fmt(x, 2)).join(', ')}), Motor/Postfix smtp-source = ${fmt(motorRate / source, 2)}×`);
    }
  }

  await motor.stop();
  const stored = await f.countEvents('MessageAccepted');
  const held = postfix.queued();
  await postfix.stop();

  console.log('\n' + table(['load', 'server ← client', `messages/s (median of ${ROUNDS})`, 'ratio (median)'], rows));
  console.log('\nratio Motor / Postfix (target ≥ 1.0×), median of the rounds:');
  for (const r of ratios) console.log(`  ${r}`);
  console.log(`\ndurability: Motor answered 250 to ${motor250} messages, ${stored} MessageAccepted in the store → ${stored >= motor250 ? 'OK' : 'FAILED'}; Postfix hold queue ${held} files for ${postfixQueued} messages`);
  if (stored < motor250) process.exitCode = 2;
});
