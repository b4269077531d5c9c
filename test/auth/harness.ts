import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { eventually, postJson, startTestMotor, type TestMotor } from '../support/motor';

/**
 * A whole Motor (API, projectors, delivery workers) with a DNS server and an MX on loopback, so
 * the service's own mail (verification codes) really travels the delivery pipeline to `*@rcpt.test`.
 */
export interface AuthHarness {
  motor: TestMotor;
  dns: TestDnsServer;
  mx: SmtpSink;
  post(path: string, body: unknown, headers?: Record<string, string>): ReturnType<typeof postJson>;
  /** The latest verification code mailed to `email` (waits for the mail). */
  codeFor(email: string, after?: number): Promise<string>;
  /** register → code from the mailbox → verify-code → set-password. */
  signUp(email: string, password?: string, headers?: Record<string, string>): Promise<{ token: string; refreshToken: string; accountId: string; userId: string }>;
  close(): Promise<void>;
}

export const PASSWORD = 'correct horse battery staple';

export async function startAuthHarness(env: Record<string, string> = {}, opts: { logLines?: string[] } = {}): Promise<AuthHarness> {
  const dns = await startDnsServer({
    'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] },
    'mx.rcpt.test': { A: ['127.0.0.1'] },
  });
  const mx = await startSmtpSink();
  const motor = await startTestMotor({ logLines: opts.logLines, env: { DNS_SERVERS: dns.address, MX_PORT: String(mx.port), DELIVERY_RETRY_SCHEDULE: '1,1,1', SYSTEM_MAIL_FROM: 'no-reply@motor.test', ANONYMOUS_REQUEST_LIMIT: '100000', ...env } });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) => postJson(`${motor.baseUrl}${path}`, body, headers);
  const codeFor = async (email: string, after = 0) => eventually(async () => {
    const mails = mx.messages.slice(after).filter((m) => m.envelope.rcptTo.map((r) => r.toLowerCase()).includes(email.toLowerCase()));
    const last = mails[mails.length - 1];
    return last ? /(\d{6}) is your Motor verification code/.exec(last.raw.toString())?.[1] ?? null : null;
  }, 20_000);
  return {
    motor, dns, mx, post, codeFor,
    async signUp(email, password = PASSWORD, headers = {}) {
      const before = mx.messages.length;
      const r = await post('/api/auth/register', { email }, headers);
      if (r.status !== 200) throw new Error(`register: ${r.status} ${JSON.stringify(r.body)}`);
      const code = await codeFor(email, before);
      const v = await post('/api/auth/verify-code', { email, code }, headers);
      if (v.status !== 200) throw new Error(`verify-code: ${v.status} ${JSON.stringify(v.body)}`);
      const s = await post('/api/auth/set-password', { email, password, setupToken: v.body.data.setupToken, channel: 'agent' }, headers);
      if (s.status !== 200) throw new Error(`set-password: ${s.status} ${JSON.stringify(s.body)}`);
      return s.body.data;
    },
    async close() {
      await motor?.close();
      await mx?.close();
      await dns?.close();
    },
  };
}
