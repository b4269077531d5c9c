import https from 'node:https';
import { isIP } from 'node:net';
import { createSecureContext, type SecureContext } from 'node:tls';
import { classifyDnsError, type DnsResolver } from './dns.js';
import { asciiDomain, resolveHostAddresses } from './mx.js';
import { isPublicAddress, pinnedLookup, type Address } from '../../infra/outboundAddress.js';
import { storableText } from '../../domain/storableJson.js';

/**
 * MTA-STS (RFC 8461): a recipient domain's published demand that mail to it go only to the MX
 * hosts it lists, over STARTTLS with a certificate valid for the MX host name. This module finds
 * and keeps the policies (TXT record, HTTPS fetch, per-process cache); smtpClient.ts applies them.
 * Nothing here throws for a network or policy problem: no usable policy is `null`, and why is told
 * to the `onEvent` hook.
 */

export type MtaStsMode = 'enforce' | 'testing' | 'none';

export interface MtaStsPolicy {
  /** The `id=` of the TXT record the policy was fetched under. */
  id: string;
  mode: MtaStsMode;
  /** MX patterns as published, lower case: `mx.example.com` or `*.example.com`. */
  mx: string[];
  /** Seconds the policy may be kept (at most 31557600, a year). */
  maxAgeSeconds: number;
}

/** RFC 8461 §3.2: max_age is at most 31557600 seconds (about a year). */
export const MAX_AGE_LIMIT = 31_557_600;
/**
 * The shortest a fetched policy is kept, whatever its max_age (0 is valid): kept for its max_age
 * alone, a `max_age: 0` policy would be fetched again by every delivery to its domain, one HTTPS
 * request per message to a host the domain may not have sized for that. A minute matches how long
 * the `_mta-sts` TXT answer is kept (dns.ts), so a new policy id is still seen within a minute.
 */
export const MIN_POLICY_KEEP_SECONDS = 60;
/** §3.3: the policy file is small; a sender may refuse a larger one. */
export const MAX_POLICY_BYTES = 64 * 1024;

/**
 * The policy id of a domain's `_mta-sts` TXT records (each the list of its strings). §3.1: the
 * records that begin with `v=STSv1;` count; anything but exactly one, or one without a valid
 * `id` (1 to 32 letters and digits), means no policy. The first `v`/`id` of a record is used.
 */
export function parseStsRecord(records: string[][]): string | null {
  const sts = records.map((parts) => parts.join('')).filter((r) => /^v=STSv1\s*;/.test(r));
  if (sts.length !== 1) return null;
  const fields = new Map<string, string>();
  for (const field of sts[0].split(';')) {
    const eq = field.indexOf('=');
    if (eq === -1) continue;
    const name = field.slice(0, eq).trim();
    if (!fields.has(name)) fields.set(name, field.slice(eq + 1).trim());
  }
  const id = fields.get('id');
  return id !== undefined && /^[A-Za-z0-9]{1,32}$/.test(id) ? id : null;
}

/**
 * A policy file (§3.2): `key: value` lines ending in LF or CRLF, in any order; `version: STSv1`,
 * `mode`, `max_age` (0 to 31557600) required, one or more `mx` (required unless the mode is
 * `none`, which publishes the end of a policy). Unknown keys are ignored; of a repeated key other
 * than `mx` the first counts. A malformed file is a string saying why, and counts as no policy.
 */
export function parseStsPolicy(text: string, id: string): MtaStsPolicy | string {
  const fields = new Map<string, string>();
  const mx: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '') continue;
    const m = /^([A-Za-z0-9][A-Za-z0-9_.-]{0,31})[ \t]*:[ \t]*(.*?)[ \t]*$/.exec(line);
    if (!m) return `line "${storableText(line, 80)}" is not "key: value"`;
    const key = m[1].toLowerCase();
    if (key === 'mx') {
      const pattern = m[2].toLowerCase().replace(/\.$/, '');
      if (!/^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(pattern)) return `mx "${storableText(m[2], 80)}" is not a host name pattern`;
      mx.push(pattern);
    } else if (!fields.has(key)) {
      fields.set(key, m[2]);
    }
  }
  if (fields.get('version') !== 'STSv1') return 'version is not STSv1';
  const mode = fields.get('mode');
  if (mode !== 'enforce' && mode !== 'testing' && mode !== 'none') return 'mode is not enforce, testing or none';
  const maxAge = fields.get('max_age');
  if (maxAge === undefined || !/^\d{1,10}$/.test(maxAge) || Number(maxAge) > MAX_AGE_LIMIT) return `max_age is not a number of seconds up to ${MAX_AGE_LIMIT}`;
  if (mx.length === 0 && mode !== 'none') return 'no mx';
  return { id, mode, mx, maxAgeSeconds: Number(maxAge) };
}

/**
 * Whether an MX host name is one a pattern allows (§4.1): an exact name, or `*.` standing for
 * exactly one leftmost label (`*.example.com` allows `mx1.example.com`, not `example.com` nor
 * `a.b.example.com`). Case and a final dot do not matter.
 */
export function mxPatternMatches(pattern: string, host: string): boolean {
  const p = pattern.toLowerCase().replace(/\.$/, '');
  const h = host.toLowerCase().replace(/\.$/, '');
  if (!p.startsWith('*.')) return p === h;
  const dot = h.indexOf('.');
  return dot > 0 && h.slice(dot + 1) === p.slice(2);
}

export const mxAllowed = (policy: MtaStsPolicy, host: string): boolean => policy.mx.some((p) => mxPatternMatches(p, host));

// ---------------------------------------------------------------------------------------------

/** What the cache did for one lookup, and what enforcement did: the worker logs and counts these. */
export type MtaStsEvent =
  | { kind: 'fetched'; domain: string; id: string; mode: MtaStsMode }
  | { kind: 'cached'; domain: string; id: string; mode: MtaStsMode }
  /** No policy could be fetched; `kept`: an unexpired cached policy is used instead. */
  | { kind: 'fetch_failed'; domain: string; detail: string; kept: boolean }
  /**
   * Under `enforce`, MX hosts of one delivery attempt were refused (not listed, no STARTTLS,
   * certificate not valid): one event per attempt and domain, `detail` naming each host.
   */
  | { kind: 'enforced_refusal'; domain: string; detail: string }
  /**
   * Under `testing`, MX hosts of one delivery attempt that `enforce` would have refused, whether
   * the message went through or not: one event per attempt and domain, `detail` naming each host.
   */
  | { kind: 'testing_would_fail'; domain: string; detail: string };

/** What smtpClient needs: the policy in force for a domain, and somewhere to say what it did. */
export interface MtaStsSource {
  /** The policy in force (cached or fetched), null when none. Never rejects. */
  policyFor(domain: string, signal?: AbortSignal): Promise<MtaStsPolicy | null>;
  report(event: MtaStsEvent): void;
  /**
   * Verifies MX certificates when not with the default trust store alone (DELIVERY_TLS_CA_FILE):
   * made once, as parsing a whole trust store for every connection would cost milliseconds each.
   */
  readonly secureContext?: SecureContext;
}

export interface MtaStsSettings {
  /**
   * Asked for the `_mta-sts` TXT record on every lookup: the worker gives the delivery path's
   * cachingResolver (dns.ts), which keeps that answer, found or not, 60 s.
   */
  resolver: DnsResolver;
  /** 443 in production (MTA_STS_PORT); tests run the policy host on loopback. */
  port: number;
  /** Fetch from policy hosts at non-public addresses too (MX_ALLOW_PRIVATE_ADDRESSES). */
  allowPrivateAddresses: boolean;
  /** The default trust store and DELIVERY_TLS_CA_FILE's certificates; undefined: the default store. */
  ca?: string[];
  /** The whole fetch: address lookup, connection, TLS, answer (default 10 s). */
  timeoutMs?: number;
  /** Domains whose policy is kept at most (default 10,000; the oldest go first). */
  maxEntries?: number;
  /** After a failed fetch, the same policy id is not fetched again for this long (default 5 min). */
  retryAfterFailureMs?: number;
  now?: () => number;
  onEvent?: (event: MtaStsEvent) => void;
}

type RecordAnswer = { kind: 'id'; id: string } | { kind: 'none' } | { kind: 'error' };

interface Kept { policy: MtaStsPolicy; expires: number }

/**
 * The per-process policy cache (§5.1). For each delivery to a domain the `_mta-sts` TXT record
 * is asked of the resolver (its answers are kept there, not here); a policy is kept for its
 * max_age, at least MIN_POLICY_KEEP_SECONDS, and reused while the record's id is the one it was
 * fetched under; a new id fetches again, once for all the deliveries that ask at the same time. When the record is gone or unreadable, or a fetch fails, an unexpired kept policy still
 * applies (§3.3: an attacker who can strip the record must not turn the policy off); with none
 * kept there is no policy and delivery goes on as without MTA-STS. A failed fetch is not tried
 * again for the same id for `retryAfterFailureMs`, so a broken policy host costs one timeout, not
 * one per message.
 */
export class MtaStsPolicies implements MtaStsSource {
  readonly secureContext?: SecureContext;
  private readonly policies = new Map<string, Kept>();
  private readonly failures = new Map<string, number>();
  private readonly fetching = new Map<string, Promise<MtaStsPolicy | null>>();
  private readonly now: () => number;
  private readonly maxEntries: number;

  constructor(private readonly settings: MtaStsSettings) {
    this.secureContext = settings.ca ? createSecureContext({ ca: settings.ca }) : undefined;
    this.now = settings.now ?? Date.now;
    this.maxEntries = settings.maxEntries ?? 10_000;
  }

  report(event: MtaStsEvent): void {
    this.settings.onEvent?.(event);
  }

  async policyFor(domainName: string, signal?: AbortSignal): Promise<MtaStsPolicy | null> {
    const domain = asciiDomain(domainName);
    if (domain === '' || domain.startsWith('[') || isIP(domain)) return null;
    const record = await this.record(domain);
    const kept = this.policies.get(domain);
    const cached = kept && kept.expires > this.now() ? kept.policy : null;
    if (kept && !cached) this.policies.delete(domain);
    if (record.kind !== 'id' || cached?.id === record.id) {
      if (cached) this.report({ kind: 'cached', domain, id: cached.id, mode: cached.mode });
      return cached;
    }
    const key = `${domain} ${record.id}`;
    if ((this.failures.get(key) ?? 0) > this.now()) return cached;
    if (signal?.aborted) return cached;
    // Deliveries to one domain at the same moment share one fetch (and one event).
    let fetching = this.fetching.get(key);
    if (!fetching) {
      fetching = this.fetchAndKeep(domain, record.id, cached !== null).finally(() => this.fetching.delete(key));
      this.fetching.set(key, fetching);
    }
    return (await fetching) ?? cached;
  }

  /** Fetches the policy of `id` and keeps it; null when it cannot be had (remembered for a while). */
  private async fetchAndKeep(domain: string, id: string, keptOne: boolean): Promise<MtaStsPolicy | null> {
    const key = `${domain} ${id}`;
    const fetched = await this.fetch(domain, id);
    if (typeof fetched === 'string') {
      this.remember(this.failures, key, this.now() + (this.settings.retryAfterFailureMs ?? 300_000));
      this.report({ kind: 'fetch_failed', domain, detail: fetched, kept: keptOne });
      return null;
    }
    this.failures.delete(key);
    const keepSeconds = Math.max(fetched.maxAgeSeconds, MIN_POLICY_KEEP_SECONDS);
    this.remember(this.policies, domain, { policy: fetched, expires: this.now() + keepSeconds * 1000 });
    this.report({ kind: 'fetched', domain, id: fetched.id, mode: fetched.mode });
    return fetched;
  }

  private async record(domain: string): Promise<RecordAnswer> {
    try {
      const id = parseStsRecord(await this.settings.resolver.resolveTxt(`_mta-sts.${domain}`));
      return id === null ? { kind: 'none' } : { kind: 'id', id };
    } catch (err) {
      return classifyDnsError(err) === 'temporary' ? { kind: 'error' } : { kind: 'none' };
    }
  }

  private remember<V>(map: Map<string, V>, key: string, value: V): void {
    map.delete(key);
    if (map.size >= this.maxEntries) map.delete(map.keys().next().value as string);
    map.set(key, value);
  }

  /** The policy at https://mta-sts.<domain>/.well-known/mta-sts.txt, or why there is none usable. */
  private async fetch(domain: string, id: string): Promise<MtaStsPolicy | string> {
    const host = `mta-sts.${domain}`;
    const deadline = AbortSignal.timeout(this.settings.timeoutMs ?? 10_000);
    const resolved = await Promise.race([
      resolveHostAddresses(this.settings.resolver, host),
      new Promise<null>((resolve) => deadline.addEventListener('abort', () => resolve(null), { once: true })),
    ]);
    if (resolved === null) return `${host} did not resolve in time`;
    if (resolved.kind !== 'addresses') return resolved.message;
    if (!this.settings.allowPrivateAddresses && !resolved.addresses.every(isPublicAddress)) {
      return `${host} has non-public addresses (${resolved.addresses.slice(0, 3).join(', ')}), refused unless MX_ALLOW_PRIVATE_ADDRESSES is on`;
    }
    const addresses: Address[] = resolved.addresses.map((address) => ({ address, family: isIP(address) as 4 | 6 }));
    const text = await this.download(host, addresses, deadline);
    if (text.kind === 'failed') return `policy fetch from ${host} failed: ${text.detail}`;
    const policy = parseStsPolicy(text.body, id);
    return typeof policy === 'string' ? `policy of ${domain} is malformed: ${policy}` : policy;
  }

  /**
   * §3.3: HTTPS with a certificate valid for the policy host, status 200, no redirect followed,
   * `text/plain`, at most 64 KiB; the socket goes to the addresses already checked.
   */
  private download(host: string, addresses: Address[], deadline: AbortSignal): Promise<{ kind: 'ok'; body: string } | { kind: 'failed'; detail: string }> {
    return new Promise((resolve) => {
      let settled = false;
      const req = https.request({
        host, port: this.settings.port, path: '/.well-known/mta-sts.txt', method: 'GET', servername: host,
        agent: false, lookup: pinnedLookup(addresses), signal: deadline, rejectUnauthorized: true,
        ...(this.secureContext ? { secureContext: this.secureContext } : {}),
        headers: { accept: 'text/plain', 'user-agent': 'Motor-MTA-STS/1.0' },
      });
      const done = (result: { kind: 'ok'; body: string } | { kind: 'failed'; detail: string }): void => {
        if (settled) return;
        settled = true;
        req.destroy();
        resolve(result);
      };
      req.on('error', (e: NodeJS.ErrnoException) => done({ kind: 'failed', detail: deadline.aborted ? 'timed out' : `${e.code ?? 'ERROR'}: ${e.message}` }));
      req.on('response', (res) => {
        if (res.statusCode !== 200) return done({ kind: 'failed', detail: `answered ${res.statusCode}${res.headers.location ? ' (redirects are not followed)' : ''}` });
        const type = String(res.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
        if (type !== 'text/plain') return done({ kind: 'failed', detail: `media type is ${type || 'missing'}, not text/plain` });
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_POLICY_BYTES) done({ kind: 'failed', detail: `the policy is over ${MAX_POLICY_BYTES} bytes` });
          else chunks.push(c);
        });
        res.on('end', () => done({ kind: 'ok', body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', () => done({ kind: 'failed', detail: deadline.aborted ? 'timed out' : 'the answer was cut short' }));
      });
      req.end();
    });
  }
}
