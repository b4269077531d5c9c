import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import nodemailer from 'nodemailer';
import { fail } from '../../domain/errors';
import type { Config } from '../../infra/config';
import type { DirectoryCache } from '../directoryCache';
import type { AuthAttempt, AuthOutcome } from '../../smtp/auth';
import { normalizeAddress } from '../../smtp/authLimiter';
import { formatReply } from '../../smtp/replies';

/**
 * POST /v1/test-email (SPEC "Send API"; docs/SMTP.md "Testing an SMTP setup"): checks the SMTP
 * settings a customer is about to put in their application by using them, from Motor, against
 * Motor's own submission listener: connect, TLS as asked, AUTH, then one real test message
 * through the normal SMTP path (quota, sender and recipient rules, logs, delivery). Outcomes of
 * the check are answered 200 with `ok` and the stage that failed; only a malformed request is an
 * error.
 *
 * It connects only to this service's SMTP host names (SMTP_PUBLIC_HOST), and on them only to the
 * SMTP ports (SMTP_PUBLIC_PORTS): the endpoint is not a way to make Motor open connections
 * elsewhere, nor to scan its own host (a closed port and a silent one answer differently). And it
 * tests only the caller's own block: the username must be that block's SMTP username.
 *
 * The connection comes from Motor's API host, not from the caller: were its logins checked only
 * by the listener, every tenant's failed test would count on that one address, and a few tenants
 * typing wrong passwords would slow down, then lock out, every tenant's test. So the credentials
 * are checked first by the listener's own AUTH (the same rules, the same failed-login counters in
 * Redis, the same SmtpAuthFailed events) against the CALLER's address; only credentials that pass
 * are then presented to the listener.
 */

export type TestMethod = 'starttls' | 'ssl' | 'tls' | 'none';
const METHODS: readonly TestMethod[] = ['starttls', 'ssl', 'tls', 'none'];

export interface TestEmailRequest {
  method?: unknown; host?: unknown; port?: unknown; username?: unknown; password?: unknown;
  to?: unknown; subject?: unknown; requireTLS?: unknown;
}

export type TestStage = 'connect' | 'tls' | 'auth' | 'send';

export interface TestEmailResult {
  /** True when the test message was accepted (250). */
  ok: boolean;
  method: TestMethod; host: string; port: number;
  /** Whether the session ran over TLS (STARTTLS upgraded, or implicit TLS). */
  tls: boolean;
  authenticated: boolean;
  /** The stage that failed, and its stable reason; null when ok. */
  failedStage: TestStage | null;
  error: string | null;
  /** The server's last reply (the 250 of the message, or the refusal). */
  smtpCode: number | null;
  smtpResponse: string | null;
  /** The Motor message id of the test message, when accepted (read it with GET /api/public/v1/messages/{id}). */
  messageId: string | null;
  durationMs: number;
}

export interface TestEmailDeps {
  directory: DirectoryCache;
  config: Pick<Config, 'smtp' | 'smtpPublicHosts' | 'smtpPublicPorts' | 'dataDir' | 'hostname'>;
  /** The SMTP listener's AUTH on its failed-login counters (scripts/runtime.ts). */
  smtpAuth(attempt: AuthAttempt): Promise<AuthOutcome>;
}

const invalid = (field: string, message: string) => fail('validation_error', 422, message, { details: { field } });
const ADDRESS = /^[^\s@<>()",;:\\[\]]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;

function checked(body: TestEmailRequest, hosts: readonly string[], ports: readonly number[]) {
  const method = body.method ?? 'starttls';
  if (typeof method !== 'string' || !(METHODS as readonly string[]).includes(method.toLowerCase())) throw invalid('method', `method must be one of ${METHODS.join(', ')}`);
  if (typeof body.host !== 'string' || body.host.trim() === '') throw invalid('host', 'host is required');
  const host = body.host.trim().toLowerCase().replace(/\.$/, '');
  if (!hosts.includes(host)) {
    throw fail('smtp_host_not_allowed', 422, `host must be this service's SMTP host (${hosts.join(', ')})`, {
      details: { field: 'host', allowed: hosts }, nextAction: 'Test the settings for this service; other SMTP servers are not contacted',
    });
  }
  if (!Number.isInteger(body.port) || (body.port as number) < 1 || (body.port as number) > 65535) throw invalid('port', 'port must be an integer from 1 to 65535');
  if (!ports.includes(body.port as number)) {
    throw fail('smtp_port_not_allowed', 422, `port must be one of this service's SMTP ports (${ports.join(', ')})`, {
      details: { field: 'port', allowed: ports }, nextAction: 'Test the STARTTLS or implicit TLS submission port of this service; other ports are not contacted',
    });
  }
  if (typeof body.username !== 'string' || body.username === '') throw invalid('username', 'username is required');
  if (typeof body.password !== 'string' || body.password === '' || body.password.length > 1024) throw invalid('password', 'password is required (at most 1024 characters)');
  if (typeof body.to !== 'string' || body.to.length > 254 || !ADDRESS.test(body.to)) throw invalid('to', 'to must be one email address');
  const subject = body.subject ?? 'Motor SMTP test';
  if (typeof subject !== 'string' || subject.length > 998 || /[\r\n\u0000]/.test(subject)) throw invalid('subject', 'subject must be one line of at most 998 characters');
  if (body.requireTLS !== undefined && typeof body.requireTLS !== 'boolean') throw invalid('requireTLS', 'requireTLS must be true or false');
  return {
    method: method.toLowerCase() as TestMethod, host, port: body.port as number, username: body.username, password: body.password,
    to: body.to, subject, requireTLS: body.requireTLS ?? method.toLowerCase() === 'starttls',
  };
}

/** The CAs a client of this service would trust: the system's, plus the listener's own certificate (self-signed in development). */
function trustedCas(config: TestEmailDeps['config']): string[] {
  const own = config.smtp.tlsCertPath ?? join(config.dataDir, 'smtp-tls', `${/^[A-Za-z0-9.-]{1,253}$/.test(config.hostname) ? config.hostname : 'localhost'}.cert.pem`);
  try {
    return [...rootCertificates, readFileSync(own, 'utf8')];
  } catch {
    return [...rootCertificates];
  }
}

/** The stage and stable reason of a nodemailer failure. */
function failureOf(err: unknown, reachedAuth: boolean): { stage: TestStage; error: string; code: number | null; response: string | null } {
  const e = err as { code?: string; responseCode?: number; response?: string; message?: string };
  const code = typeof e.responseCode === 'number' ? e.responseCode : null;
  const response = typeof e.response === 'string' ? e.response.slice(0, 1000) : null;
  const tlsProblem = /certificate|self[- ]signed|TLS|SSL|handshake/i.test(e.message ?? '');
  switch (e.code) {
    case 'EAUTH': return { stage: 'auth', error: code === 535 ? 'authentication_failed' : 'authentication_refused', code, response };
    case 'ETLS': return { stage: 'tls', error: 'tls_failed', code, response };
    case 'EENVELOPE': case 'EMESSAGE': return { stage: 'send', error: 'message_refused', code, response };
    default:
      if (reachedAuth) return { stage: 'send', error: 'message_refused', code, response };
      if (tlsProblem) return { stage: 'tls', error: /certificate|self[- ]signed/i.test(e.message ?? '') ? 'certificate_untrusted' : 'tls_failed', code, response };
      if (e.code === 'ETIMEDOUT') return { stage: 'connect', error: 'timeout', code, response };
      return { stage: 'connect', error: 'connection_failed', code, response };
  }
}

export async function testEmail(deps: TestEmailDeps, motorBlockId: string, body: TestEmailRequest, callerAddress: string, now: () => number = Date.now): Promise<TestEmailResult> {
  const r = checked(body, deps.config.smtpPublicHosts, deps.config.smtpPublicPorts);
  const block = await deps.directory.block(motorBlockId);
  if (!block) throw fail('motor_block_not_found', 404, 'Motor Block not found');
  if (r.username !== block.smtpUsername) {
    throw fail('smtp_username_mismatch', 422, 'username must be the SMTP username of this Motor Block (the API key\'s block)', { details: { field: 'username' } });
  }
  const domain = await deps.directory.domain(block.domainId);
  const started = now();
  const session = {
    host: r.host, port: r.port, secure: r.method === 'ssl' || r.method === 'tls', requireTLS: r.method === 'starttls' && r.requireTLS,
    ignoreTLS: r.method === 'none',
    tls: { servername: r.host, ca: trustedCas(deps.config), minVersion: 'TLSv1.2' as const },
    connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 15_000, name: deps.config.hostname,
  };
  const result: TestEmailResult = {
    ok: false, method: r.method, host: r.host, port: r.port, tls: false, authenticated: false, failedStage: null, error: null,
    smtpCode: null, smtpResponse: null, messageId: null, durationMs: 0,
  };
  // AUTH even when the server does not offer it: otherwise verify() passes without logging in.
  const transport = nodemailer.createTransport({ ...session, auth: { user: r.username, pass: r.password }, forceAuth: true });
  try {
    // Connect and TLS as asked, without logging in.
    const probe = nodemailer.createTransport(session);
    try {
      await probe.verify();
    } finally {
      probe.close();
    }
    result.tls = r.method !== 'none';
    if (block.authMethod === 'mtls') {
      // The check has no client certificate to present: its login would fail, and count as a failed
      // login of the caller's. Connection and TLS are tested; the login is the client's own to test.
      Object.assign(result, { failedStage: 'auth', error: 'client_certificate_required' });
      return result;
    }
    const login = await deps.smtpAuth({ mechanism: 'PLAIN', username: r.username, password: r.password, remoteAddress: normalizeAddress(callerAddress) });
    if (!login.ok) {
      Object.assign(result, {
        failedStage: 'auth', error: login.reply.code === 535 ? 'authentication_failed' : 'authentication_refused',
        smtpCode: login.reply.code, smtpResponse: formatReply(login.reply),
      });
      return result;
    }
    await transport.verify();
    result.authenticated = true;
    const info = await transport.sendMail({
      from: `smtp-test@${domain?.name ?? 'invalid'}`, to: r.to, subject: r.subject,
      text: `This message tests the SMTP settings of the Motor Block "${block.name}": ${r.method} on ${r.host}:${r.port}. It went through the same path as your application's mail.\n`,
    });
    result.ok = true;
    result.smtpResponse = info.response;
    result.smtpCode = Number(info.response.slice(0, 3)) || null;
    result.messageId = /queued as ([0-9a-f-]{36})/.exec(info.response)?.[1] ?? null;
  } catch (err) {
    const f = failureOf(err, result.authenticated);
    Object.assign(result, { failedStage: f.stage, error: f.error, smtpCode: f.code, smtpResponse: f.response });
  } finally {
    transport.close();
    result.durationMs = now() - started;
  }
  return result;
}
