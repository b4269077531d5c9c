import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';

/** 250 accepts; otherwise the reply to send (put the enhanced code first in `message`: "4.2.0 Greylisted"). */
export type SinkReply = 250 | { code: number; message: string };

export interface SmtpSinkOptions {
  /** Offer STARTTLS with a self-signed certificate (default true). */
  starttls?: boolean;
  /** Advertise STARTTLS but fail every handshake (the server only speaks TLS 1.0, which clients refuse). */
  brokenStarttls?: boolean;
  /** Implicit TLS from the first byte (an smtps:// smart host). */
  secure?: boolean;
  /** Require AUTH PLAIN/LOGIN with these credentials (a smart host); no AUTH at all otherwise. */
  auth?: { user: string; pass: string };
  /** Reply to each RCPT TO (default 250). */
  rcpt?: (recipient: string) => SinkReply | Promise<SinkReply>;
  /** Reply to MAIL FROM (default 250). */
  mailFrom?: (sender: string) => SinkReply | Promise<SinkReply>;
  /** Reply after the message data (default 250); the message is recorded either way. */
  data?: (message: ReceivedMessage) => SinkReply | Promise<SinkReply>;
  /** Host name in the banner. */
  name?: string;
  /** Offer SMTPUTF8 (default true, as smtp-server does). */
  smtputf8?: boolean;
  /** The certificate to present (default testCertificate(), self-signed); test/support/testCa.ts issues valid ones. */
  tls?: { key: Buffer; cert: Buffer };
  /**
   * Where to listen (default 127.0.0.1 and a random port): another loopback address on a sink's
   * port is a second MX that a delivery's one MX port reaches.
   */
  listen?: { host: string; port: number };
}

export interface ReceivedMessage {
  envelope: { mailFrom: string; rcptTo: string[] };
  /** The MAIL FROM parameters as given (e.g. { BODY: '8BITMIME', SIZE: '1234' }). */
  mailFromArgs: Record<string, string>;
  raw: Buffer;
  /** The session was TLS (STARTTLS or implicit) when the message was sent. */
  secure: boolean;
  /** What the client said in EHLO/HELO. */
  heloName: string;
  sessionId: string;
  /** The authenticated user, when AUTH was required. */
  user: string | null;
}

export interface SmtpSink {
  host: string;
  port: number;
  /** Messages received (accepted or not by the `data` script), in order. */
  messages: ReceivedMessage[];
  /** Every RCPT TO seen, accepted or not. */
  rcptAttempts: string[];
  /** Number of client connections so far. */
  connections: number;
  /** Replace the RCPT TO script. */
  setRcpt(fn: SmtpSinkOptions['rcpt']): void;
  /** Resolves once `n` messages have arrived (rejects after `timeoutMs`, default 5 s). */
  waitFor(n: number, timeoutMs?: number): Promise<ReceivedMessage[]>;
  close(): Promise<void>;
}

/**
 * A self-signed certificate for localhost, relay.test, smtp.test and 127.0.0.1 (Node refuses a
 * wildcard like *.test), made once with openssl and cached in the temp dir.
 */
export function testCertificate(): { key: Buffer; cert: Buffer } {
  const dir = join(tmpdir(), 'motor-test-smtp-cert-v3');
  const keyPath = join(dir, 'key.pem');
  const certPath = join(dir, 'cert.pem');
  if (!existsSync(keyPath) || !existsSync(certPath)) {
    mkdirSync(dir, { recursive: true });
    const suffix = `${process.pid}-${Date.now()}`;
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '3650', '-subj', '/CN=localhost',
      '-addext', 'subjectAltName=DNS:localhost,DNS:relay.test,DNS:smtp.test,IP:127.0.0.1',
      '-keyout', `${keyPath}.${suffix}`, '-out', `${certPath}.${suffix}`,
    ], { stdio: 'ignore' });
    // Renames are atomic, so parallel test processes never read a half-written file.
    renameSync(`${keyPath}.${suffix}`, keyPath);
    renameSync(`${certPath}.${suffix}`, certPath);
  }
  return { key: readFileSync(keyPath), cert: readFileSync(certPath) };
}

function replyError(reply: SinkReply): Error | null {
  if (reply === 250) return null;
  return Object.assign(new Error(reply.message), { responseCode: reply.code });
}

/**
 * A recipient MX (or, with `auth`, a smart host) on 127.0.0.1 and a random port (or `listen`), for tests.
 * Replies come from the scripts in `opts`; every message that reaches DATA is recorded.
 */
export async function startSmtpSink(opts: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const { key, cert } = opts.tls ?? testCertificate();
  const starttls = opts.starttls ?? true;
  let rcptScript = opts.rcpt;
  const messages: ReceivedMessage[] = [];
  const rcptAttempts: string[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  let connections = 0;

  const disabledCommands: string[] = [];
  if (!opts.auth) disabledCommands.push('AUTH');
  if (!starttls && !opts.secure) disabledCommands.push('STARTTLS');

  const server = new SMTPServer({
    secure: opts.secure ?? false,
    key,
    cert,
    name: opts.name ?? 'mx.sink.test',
    ...(opts.brokenStarttls ? { minVersion: 'TLSv1' as const, maxVersion: 'TLSv1' as const } : {}),
    disabledCommands,
    hideSTARTTLS: !starttls && !opts.secure,
    authOptional: !opts.auth,
    allowInsecureAuth: true,
    authMethods: ['PLAIN', 'LOGIN'],
    disableReverseLookup: true,
    hideENHANCEDSTATUSCODES: true,
    hideSMTPUTF8: opts.smtputf8 === false,
    size: 50 * 1024 * 1024,
    closeTimeout: 200,
    logger: false,
    onConnect(_session, callback) {
      connections++;
      callback();
    },
    onAuth(auth, _session, callback) {
      if (opts.auth && auth.username === opts.auth.user && auth.password === opts.auth.pass) return callback(null, { user: auth.username });
      callback(Object.assign(new Error('5.7.8 Invalid credentials'), { responseCode: 535 }));
    },
    onMailFrom(address, _session, callback) {
      Promise.resolve(opts.mailFrom ? opts.mailFrom(address.address) : 250).then((r) => callback(replyError(r)), callback);
    },
    onRcptTo(address, _session, callback) {
      rcptAttempts.push(address.address);
      Promise.resolve(rcptScript ? rcptScript(address.address) : 250).then((r) => callback(replyError(r)), callback);
    },
    onData(stream, session: SMTPServerSession, callback) {
      // smtp-server resets session.envelope once this callback runs: copy it now.
      const envelope = {
        mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
        rcptTo: session.envelope.rcptTo.map((r) => r.address),
      };
      const mailFromArgs = { ...((session.envelope.mailFrom ? session.envelope.mailFrom.args : null) || {}) } as Record<string, string>;
      const secure = session.secure;
      const heloName = session.hostNameAppearsAs;
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', (err: Error) => callback(err));
      stream.on('end', () => {
        const message: ReceivedMessage = {
          envelope,
          mailFromArgs,
          raw: Buffer.concat(chunks),
          secure,
          heloName,
          sessionId: session.id,
          user: typeof session.user === 'string' ? session.user : null,
        };
        messages.push(message);
        for (const w of [...waiters]) {
          if (messages.length >= w.n) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve();
          }
        }
        Promise.resolve(opts.data ? opts.data(message) : 250).then((r) => callback(replyError(r)), callback);
      });
    },
  });
  server.on('error', () => undefined); // client resets during tests are expected

  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(opts.listen?.port ?? 0, opts.listen?.host ?? '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as AddressInfo).port;

  return {
    host: opts.listen?.host ?? '127.0.0.1',
    port,
    messages,
    rcptAttempts,
    get connections() {
      return connections;
    },
    setRcpt: (fn) => {
      rcptScript = fn;
    },
    waitFor: (n, timeoutMs = 5000) =>
      new Promise<ReceivedMessage[]>((resolve, reject) => {
        if (messages.length >= n) return resolve(messages.slice(0, n));
        const timer = setTimeout(() => reject(new Error(`smtp sink: ${messages.length} of ${n} messages after ${timeoutMs} ms`)), timeoutMs);
        waiters.push({ n, resolve: () => (clearTimeout(timer), resolve(messages.slice(0, n))) });
      }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
