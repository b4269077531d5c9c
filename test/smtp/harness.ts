import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import nodemailer from 'nodemailer';
import { startRoles, type StartedRoles, type StartOptions } from '../../scripts/runtime';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, testCertificate, type SmtpSink } from '../support/smtpSink';
import { startTestMotor, type TestMotor } from '../support/motor';
import { AuthLimiter, DEFAULT_AUTH_LIMITS, type AuthLimiterSettings } from '../../smtp/authLimiter';

/**
 * A Motor (API, projectors, workers) plus its SMTP listeners on free ports (or on SMTP_PORT /
 * SMTPS_PORT when `env` sets them), a loopback DNS server and a loopback recipient MX: what an
 * SMTP submission test needs end to end. The listeners use the test certificate from files
 * (SMTP_TLS_CERT / SMTP_TLS_KEY), so clients can verify it.
 */
export interface SmtpHarness {
  motor: TestMotor;
  smtp: StartedRoles;
  dns: TestDnsServer;
  mx: SmtpSink;
  port: number;
  securePort: number;
  ca: Buffer;
  /** A bootstrapped block whose domain (`domain`, else a random one) has its DNS records published. */
  newBlock(opts?: { domain?: string }): Promise<BootstrapResult & { domain: string }>;
  close(): Promise<void>;
}

export function testCertPaths(): { cert: string; key: string } {
  testCertificate();
  const dir = join(tmpdir(), 'motor-test-smtp-cert-v3');
  return { cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem') };
}

/**
 * `logLines` collects every log line (trace level) instead of the silent default. `authLimits`
 * replaces some of the failed-AUTH limiter's settings (smtp/authLimiter.ts) for the listeners, for a
 * test that makes many failed logins and must not sit out the production slowdown after each.
 */
export async function startSmtpHarness(opts: {
  env?: Record<string, string>; smtp?: StartOptions['smtp']; logLines?: string[]; authLimits?: Partial<AuthLimiterSettings>;
} = {}): Promise<SmtpHarness> {
  const dns = await startDnsServer({
    'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
    'mx.rcpt.test': { A: ['127.0.0.1'] },
  });
  const mx = await startSmtpSink();
  const paths = testCertPaths();
  const motor = await startTestMotor({
    env: {
      DNS_SERVERS: dns.address, MX_PORT: String(mx.port), DELIVERY_RETRY_SCHEDULE: '1,1,1',
      SMTP_TLS_CERT: paths.cert, SMTP_TLS_KEY: paths.key, MOTOR_HOSTNAME: 'localhost', ...opts.env,
    },
    logLines: opts.logLines,
  });
  if (opts.authLimits) {
    // Same Redis and key prefix as the runtime's own limiter (scripts/runtime.ts), other settings.
    motor.rt.smtpAuthLimiter = new AuthLimiter(motor.rt.redis, { ...DEFAULT_AUTH_LIMITS, ...opts.authLimits }, `${motor.rt.queuePrefix}:smtp:authfail`);
  }
  const smtp = await startRoles(motor.rt, ['smtp'], {
    // Free ports, unless the test configures SMTP_PORT / SMTPS_PORT: then the listeners bind those, as in production.
    host: '127.0.0.1', smtpPort: opts.env?.SMTP_PORT === undefined ? 0 : undefined, smtpsPort: opts.env?.SMTPS_PORT === undefined ? 0 : undefined,
    // The AUTH failure counters are under the runtime's queue prefix: one of their own per test Motor.
    smtp: opts.smtp,
  });
  return {
    motor, smtp, dns, mx,
    port: smtp.smtp!.port,
    securePort: smtp.smtp!.securePort,
    ca: testCertificate().cert,
    async newBlock(o = {}) {
      const b = await motor.bootstrap({ trustDns: true, domain: o.domain });
      const domain = b.dnsRecords.find((r) => r.purpose === 'spf')!.name;
      for (const r of b.dnsRecords) dns.addRecords(r.name, { TXT: [r.value] });
      return { ...b, domain };
    },
    async close() {
      await smtp.stop();
      await motor.close();
      await mx.close();
      await dns.close();
    },
  };
}

/** A nodemailer transport to the STARTTLS (`secure: false`) or implicit TLS (`secure: true`) port. */
export function transport(h: SmtpHarness, o: { user: string; pass: string; method?: 'PLAIN' | 'LOGIN'; secure?: boolean }) {
  return nodemailer.createTransport({
    host: '127.0.0.1', port: o.secure ? h.securePort : h.port, secure: o.secure ?? false, requireTLS: !o.secure,
    auth: { user: o.user, pass: o.pass, method: o.method ?? 'PLAIN' },
    tls: { ca: [h.ca], servername: 'localhost' },
    connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 20_000,
  });
}

/** A line-oriented raw SMTP client for the hostile cases: read replies, write anything. */
export class RawClient {
  private buffer = '';
  private waiters: Array<() => void> = [];
  closed = false;

  private constructor(public socket: Socket | TLSSocket) {
    this.attach(socket);
  }

  private attach(socket: Socket | TLSSocket) {
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      this.buffer += d;
      this.wake();
    });
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', () => {});
  }

  private wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** `localAddress`: another loopback address to come from (127.0.0.2...), as a second client would. */
  static async connect(port: number, secure = false, ca?: Buffer, localAddress?: string): Promise<RawClient> {
    const socket = secure
      ? tlsConnect({ host: '127.0.0.1', port, ca: ca ? [ca] : undefined, servername: 'localhost', ...(localAddress ? { socket: netConnect({ host: '127.0.0.1', port, localAddress }) } : {}) })
      : netConnect({ host: '127.0.0.1', port, localAddress });
    await new Promise<void>((resolve, reject) => {
      socket.once(secure ? 'secureConnect' : 'connect', () => resolve());
      socket.once('error', reject);
    });
    return new RawClient(socket);
  }

  write(s: string | Buffer): void {
    this.socket.write(s);
  }

  /** The next complete reply (multi-line joined with \n); null if the connection closed first. */
  async reply(timeoutMs = 5000): Promise<string | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = /^(?:\d{3}-[^\r\n]*\r\n)*\d{3}(?: [^\r\n]*)?\r\n/.exec(this.buffer);
      if (m) {
        this.buffer = this.buffer.slice(m[0].length);
        return m[0].replace(/\r\n$/, '').replace(/\r\n/g, '\n');
      }
      if (this.closed) return null;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no reply within ${timeoutMs} ms (buffer: ${JSON.stringify(this.buffer.slice(0, 200))})`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
  }

  async command(line: string, timeoutMs?: number): Promise<string | null> {
    this.write(`${line}\r\n`);
    return this.reply(timeoutMs);
  }

  /** Upgrades after a 220 to STARTTLS; whatever was buffered in cleartext is dropped. */
  async startTls(ca: Buffer): Promise<void> {
    const raw = this.socket as Socket;
    raw.removeAllListeners('data');
    raw.removeAllListeners('close');
    this.buffer = '';
    const tls = tlsConnect({ socket: raw, ca: [ca], servername: 'localhost' });
    await new Promise<void>((resolve, reject) => {
      tls.once('secureConnect', () => resolve());
      tls.once('error', reject);
    });
    this.socket = tls;
    this.attach(tls);
  }

  async authPlain(user: string, pass: string): Promise<string | null> {
    return this.command(`AUTH PLAIN ${Buffer.from(`\0${user}\0${pass}`).toString('base64')}`);
  }

  /** Waits for the server to close the connection. */
  async closedWithin(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!this.closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    return this.closed;
  }

  end(): void {
    this.socket.destroy();
  }
}

const expectReply = async (p: Promise<string | null>, re: RegExp) => {
  const r = await p;
  if (!r || !re.test(r)) throw new Error(`unexpected reply ${JSON.stringify(r)} (wanted ${re})`);
};

/** A raw session past STARTTLS and the second EHLO, not authenticated (from `localAddress`, default 127.0.0.1). */
export async function rawTlsSession(h: SmtpHarness, localAddress?: string): Promise<RawClient> {
  const c = await RawClient.connect(h.port, false, h.ca, localAddress);
  await expectReply(c.reply(), /^220 /);
  await expectReply(c.command('EHLO client.test'), /^250/);
  await expectReply(c.command('STARTTLS'), /^220 /);
  await c.startTls(h.ca);
  await expectReply(c.command('EHLO client.test'), /^250/);
  return c;
}

/** A raw STARTTLS session authenticated as the block, for replies nodemailer hides (RCPT TO). */
export async function rawSession(h: SmtpHarness, b: { smtpUsername: string; smtpPassword: string }): Promise<RawClient> {
  const c = await rawTlsSession(h);
  await expectReply(c.authPlain(b.smtpUsername, b.smtpPassword), /^235 /);
  return c;
}

/** A minimal RFC 5322 message. */
export function rfc822(o: { from: string; to: string; subject?: string; extraHeaders?: string[]; body?: string; messageId?: string | null }): string {
  const lines = [
    `From: ${o.from}`,
    `To: ${o.to}`,
    `Subject: ${o.subject ?? 'Hello over SMTP'}`,
    ...(o.messageId === null ? [] : [`Message-ID: <${o.messageId ?? `${Math.random().toString(36).slice(2)}@client.example`}>`]),
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    ...(o.extraHeaders ?? []),
    '',
    o.body ?? 'Hi there',
    '',
  ];
  return lines.join('\r\n');
}
