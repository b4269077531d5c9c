import { classifyDnsError, type DnsResolver } from '../../workers/delivery/dns';
import { checkSyntax, type SyntaxReason } from '../../domain/emailValidation/syntax';
import { isDisposableDomain, isRoleAccount } from '../../domain/emailValidation/lists';
import { suggestDomain } from '../../domain/emailValidation/suggest';

/**
 * Email address validation (SPEC "Email validation"; docs/AUTH.md): syntax (RFC 5321/5322/6531,
 * domain/emailValidation/syntax.ts), then the domain through the resolver (MX; no MX → A/AAAA as
 * RFC 5321 §5.1's implicit MX; a null MX, RFC 7505, means the domain accepts no mail), then the
 * disposable and role flags and a typo suggestion. `valid` is syntax ∧ a domain that can receive
 * mail; disposable and role are flags, never reasons. A DNS failure (timeout, SERVFAIL) leaves
 * the domain `unknown` and does not make the address invalid.
 */

export type DomainStatus = 'ok' | 'not_found' | 'no_mail_server' | 'null_mx' | 'address_literal' | 'unknown' | 'skipped';

export interface ValidationResult {
  email: string;
  valid: boolean;
  /** Stable code when not valid: a syntax reason, or domain_not_found, no_mail_server, null_mx. */
  reason: SyntaxReason | 'domain_not_found' | 'no_mail_server' | 'null_mx' | null;
  normalized: string | null;
  checks: {
    syntax: { valid: boolean; reason: SyntaxReason | null };
    domain: { status: DomainStatus; asciiDomain: string | null };
    mx: { status: 'ok' | 'implicit' | 'null_mx' | 'none' | 'unknown' | 'skipped'; hosts: string[] };
    disposable: boolean;
    role: boolean;
  };
  suggestion: string | null;
}

interface DomainVerdict { domain: DomainStatus; mx: ValidationResult['checks']['mx'] }

async function lookup<T>(fn: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; kind: 'nxdomain' | 'nodata' | 'temporary' }> {
  try {
    return { ok: true, value: await fn() };
  } catch (err) {
    return { ok: false, kind: classifyDnsError(err) };
  }
}

export async function checkDomain(resolver: DnsResolver, asciiDomain: string): Promise<DomainVerdict> {
  const mx = await lookup(() => resolver.resolveMx(asciiDomain));
  if (mx.ok && mx.value.length > 0) {
    const hosts = [...mx.value].sort((a, b) => a.priority - b.priority).map((r) => r.exchange.replace(/\.$/, ''));
    if (hosts.length === 1 && hosts[0] === '') return { domain: 'null_mx', mx: { status: 'null_mx', hosts: [] } };
    return { domain: 'ok', mx: { status: 'ok', hosts } };
  }
  if (!mx.ok && mx.kind === 'nxdomain') return { domain: 'not_found', mx: { status: 'none', hosts: [] } };
  if (!mx.ok && mx.kind === 'temporary') return { domain: 'unknown', mx: { status: 'unknown', hosts: [] } };
  const [a, aaaa] = await Promise.all([lookup(() => resolver.resolve4(asciiDomain)), lookup(() => resolver.resolve6(asciiDomain))]);
  if ((a.ok && a.value.length > 0) || (aaaa.ok && aaaa.value.length > 0)) return { domain: 'ok', mx: { status: 'implicit', hosts: [asciiDomain] } };
  if ((!a.ok && a.kind === 'temporary') || (!aaaa.ok && aaaa.kind === 'temporary')) return { domain: 'unknown', mx: { status: 'unknown', hosts: [] } };
  if (!a.ok && a.kind === 'nxdomain') return { domain: 'not_found', mx: { status: 'none', hosts: [] } };
  return { domain: 'no_mail_server', mx: { status: 'none', hosts: [] } };
}

export async function validateEmail(resolver: DnsResolver, email: string, domainCache = new Map<string, Promise<DomainVerdict>>()): Promise<ValidationResult> {
  const syntax = checkSyntax(email);
  if (!syntax.ok) {
    const at = email.lastIndexOf('@');
    const suggested = at > 0 ? suggestDomain(email.slice(at + 1)) : null;
    return {
      email, valid: false, reason: syntax.reason, normalized: null,
      checks: { syntax: { valid: false, reason: syntax.reason }, domain: { status: 'skipped', asciiDomain: null }, mx: { status: 'skipped', hosts: [] }, disposable: false, role: false },
      suggestion: suggested ? `${email.slice(0, at)}@${suggested}` : null,
    };
  }
  let verdict: DomainVerdict;
  if (syntax.literal) {
    verdict = { domain: 'address_literal', mx: { status: 'skipped', hosts: [] } };
  } else {
    let p = domainCache.get(syntax.asciiDomain);
    if (!p) {
      p = checkDomain(resolver, syntax.asciiDomain);
      domainCache.set(syntax.asciiDomain, p);
    }
    verdict = await p;
  }
  const reason = verdict.domain === 'not_found' ? 'domain_not_found' : verdict.domain === 'no_mail_server' ? 'no_mail_server' : verdict.domain === 'null_mx' ? 'null_mx' : null;
  const suggested = syntax.literal ? null : suggestDomain(syntax.domain);
  return {
    email, valid: reason === null, reason, normalized: syntax.normalized,
    checks: {
      syntax: { valid: true, reason: null },
      domain: { status: verdict.domain, asciiDomain: syntax.literal ? null : syntax.asciiDomain },
      mx: verdict.mx,
      disposable: !syntax.literal && isDisposableDomain(syntax.asciiDomain),
      role: isRoleAccount(syntax.local),
    },
    suggestion: suggested ? `${syntax.local}@${suggested}` : null,
  };
}

export const MAX_BATCH = 100;

/** One result per address, in order; each domain is resolved once, at most 8 lookups at a time. */
export async function validateBatch(resolver: DnsResolver, emails: string[]): Promise<ValidationResult[]> {
  const cache = new Map<string, Promise<DomainVerdict>>();
  const out: ValidationResult[] = new Array(emails.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(8, emails.length) }, async () => {
    while (next < emails.length) {
      const i = next++;
      out[i] = await validateEmail(resolver, emails[i], cache);
    }
  }));
  return out;
}
