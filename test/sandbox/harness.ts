import { randomBytes } from 'node:crypto';
import { bootstrap, type BootstrapResult } from '../../commands/admin/bootstrap';
import { parseApiKey } from '../../domain/credentials/apiKeys';
import { streamName } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { findApiKeyByPrefix, getBlock, getDomain } from '../../projections/directory/queries';
import { generateDkimKey } from '../../workers/delivery/dkim';
import { eventually, getJson, postJson } from '../support/motor';
import { startSmtpHarness, type SmtpHarness } from '../smtp/harness';

/**
 * Sandbox and free-recipient tests: a whole Motor (API, projectors, workers) with its SMTP
 * listeners, a DNS server and an MX on loopback (test/smtp/harness.ts), so the service's own mail
 * (verification codes, confirmation links) really travels the pipeline to `*@rcpt.test`.
 */
export interface SandboxHarness extends SmtpHarness {
  url(path: string): string;
  /** A dashboard user (register → mailed code → verify → set-password): its JWT and account. */
  signUp(email?: string): Promise<{ token: string; accountId: string; email: string }>;
  /** An account bootstrapped on `plan` with a trusted domain (DNS published on the loopback DNS). */
  bootstrapAccount(plan: string, email?: string): Promise<BootstrapResult & { domain: string; email: string }>;
  /** Mints a public bearer token with a dashboard JWT (POST /api/public/token). */
  dashboardToken(jwt: string, motorBlockId: string, scopes: string[]): Promise<string>;
  /** A domain on `accountId` as events (added; verified and DNS-configured when `verified`). */
  addDomain(accountId: string, verified: boolean): Promise<{ id: string; name: string }>;
  /** Mails captured by the MX for `email`, after index `after`. */
  mailsTo(email: string, after?: number): string[];
  patch(path: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; body: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any
  del(path: string, headers: Record<string, string>): Promise<{ status: number; body: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export const PASSWORD = 'correct horse battery staple';
export const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
export const uniq = () => randomBytes(4).toString('hex');

export async function startSandboxHarness(env: Record<string, string> = {}): Promise<SandboxHarness> {
  const h = await startSmtpHarness({ env: { SYSTEM_MAIL_FROM: 'no-reply@motor.test', ANONYMOUS_REQUEST_LIMIT: '100000', API_REQUEST_LIMIT: '100000', ...env } });
  const url = (path: string) => `${h.motor.baseUrl}${path}`;
  const mailsTo = (email: string, after = 0) => h.mx.messages.slice(after)
    .filter((m) => m.envelope.rcptTo.map((r) => r.toLowerCase()).includes(email.toLowerCase())).map((m) => m.raw.toString());
  const send = async (method: string, path: string, body: unknown, headers: Record<string, string>) => {
    const res = await fetch(url(path), { method, headers: { 'content-type': 'application/json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
    try { json = JSON.parse(text); } catch { json = text; }
    return { status: res.status, body: json };
  };
  return {
    ...h,
    url,
    mailsTo,
    patch: (path, body, headers) => send('PATCH', path, body, headers),
    del: (path, headers) => send('DELETE', path, undefined, headers),
    async signUp(email = `dev-${uniq()}@rcpt.test`) {
      const before = h.mx.messages.length;
      const r = await postJson(url('/api/auth/register'), { email });
      if (r.status !== 200) throw new Error(`register: ${r.status} ${JSON.stringify(r.body)}`);
      const code = await eventually(async () => {
        for (const raw of mailsTo(email, before)) {
          const m = /(\d{6}) is your Motor verification code/.exec(raw);
          if (m) return m[1];
        }
        return null;
      }, 20_000);
      const v = await postJson(url('/api/auth/verify-code'), { email, code });
      if (v.status !== 200) throw new Error(`verify-code: ${v.status} ${JSON.stringify(v.body)}`);
      const s = await postJson(url('/api/auth/set-password'), { email, password: PASSWORD, setupToken: v.body.data.setupToken, channel: 'agent' });
      if (s.status !== 200) throw new Error(`set-password: ${s.status} ${JSON.stringify(s.body)}`);
      return { token: s.body.data.token, accountId: s.body.data.accountId, email };
    },
    async bootstrapAccount(plan, email = `owner-${uniq()}@rcpt.test`) {
      const result = await bootstrap(h.motor.rt.store, h.motor.rt.keys, {
        email, domain: `d${uniq()}.example.test`, trustDns: true, dkimAlgorithm: 'rsa-sha256', plan,
        serviceDomain: h.motor.config.serviceDomain, now: new Date(),
      });
      const prefix = parseApiKey(result.accountApiKey)!.prefix;
      // The block too: bootstrap appends the keys before the block, and the projector may show one batch without the next.
      await eventually(async () => (await findApiKeyByPrefix(h.motor.rt.db, prefix)) !== null && (await getBlock(h.motor.rt.db, result.motorBlockId)) !== null);
      const domain = result.dnsRecords.find((r) => r.purpose === 'spf')!.name;
      for (const r of result.dnsRecords) h.dns.addRecords(r.name, { TXT: [r.value] });
      return { ...result, domain, email };
    },
    async dashboardToken(jwt, motorBlockId, scopes) {
      const r = await postJson(url('/api/public/token'), { motorBlockId, scopes }, bearer(jwt));
      if (r.status !== 200) throw new Error(`token: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.data.token;
    },
    async addDomain(accountId, verified) {
      const id = newId();
      const name = `own${uniq()}.example.test`;
      const at = new Date().toISOString();
      const dkim = await generateDkimKey('rsa-sha256');
      const dkimKeyId = newId();
      await h.motor.rt.keys.put(dkimKeyId, 'rsa-sha256', dkim.privateKeyPem);
      const events: DomainEvent[] = [{
        type: 'DomainAdded',
        data: { domainId: id, accountId, name, dkimSelector: 'motor', dkimAlgorithm: 'rsa-sha256', dkimPublicKey: dkim.publicKeyDnsValue, dkimKeyId, addedAt: at },
      }];
      if (verified) {
        events.push(
          { type: 'DomainOwnershipVerified', data: { domainId: id, method: 'trusted', verifiedAt: at } },
          { type: 'DomainDnsChecked', data: { domainId: id, method: 'trusted', spfConfigured: true, dkimConfigured: true, dmarcConfigured: true, checkedAt: at } },
        );
      }
      await h.motor.rt.store.append(streamName('sendingDomain', id), events.map((e) => toEventData(newId(), e, { actor: 'test' })), { expectedRevision: 'no_stream' });
      await eventually(async () => getDomain(h.motor.rt.db, id));
      return { id, name };
    },
  };
}

export { getJson, postJson, eventually };
