import type { DkimAlgorithm, DomainRecordCheck } from '../events';

/**
 * The DNS records a sending domain needs (what the owner publishes) and the pure evaluation of
 * what a lookup found against them, record by record, with a specific reason for every failure
 * (docs/DOMAINS.md "Check reasons"). No I/O here: commands/domains/dnsCheck.ts does the lookups.
 */

export type RecordPurpose = DomainRecordCheck['purpose'];
export interface ExpectedRecord { type: 'TXT' | 'CNAME'; name: string; value: string; purpose: RecordPurpose }

/** Where the ownership token lives; the value is `motor-verification=<token>`. */
export const ownershipRecordName = (domain: string): string => `_motor-verification.${domain}`;
export const ownershipRecordValue = (token: string): string => `motor-verification=${token}`;
export const spfInclude = (serviceDomain: string): string => `_spf.${serviceDomain}`;
export const dkimRecordName = (selector: string, domain: string): string => `${selector}._domainkey.${domain}`;
/** cname_managed: the name the service serves the key at (the owner's CNAME points here). */
export const managedDkimTarget = (selector: string, domainId: string, serviceDomain: string): string => `${selector}.${domainId}.dkim.${serviceDomain}`;
export const dkimTxtValue = (algorithm: DkimAlgorithm, publicKey: string): string =>
  `v=DKIM1; k=${algorithm === 'ed25519-sha256' ? 'ed25519' : 'rsa'}; p=${publicKey}`;

export interface RecordInputs {
  domainId: string; name: string; serviceDomain: string;
  ownershipToken: string | null; dkimMode: 'txt' | 'cname_managed';
  dkim: { selector: string; algorithm: DkimAlgorithm; publicKey: string };
}

/** Ownership (when the domain has a token), SPF, DKIM (TXT key or the CNAME), DMARC. */
export function expectedRecords(d: RecordInputs): ExpectedRecord[] {
  const out: ExpectedRecord[] = [];
  if (d.ownershipToken) out.push({ type: 'TXT', name: ownershipRecordName(d.name), value: ownershipRecordValue(d.ownershipToken), purpose: 'ownership' });
  out.push({ type: 'TXT', name: d.name, value: `v=spf1 include:${spfInclude(d.serviceDomain)} ~all`, purpose: 'spf' });
  out.push(d.dkimMode === 'cname_managed'
    ? { type: 'CNAME', name: dkimRecordName(d.dkim.selector, d.name), value: managedDkimTarget(d.dkim.selector, d.domainId, d.serviceDomain), purpose: 'dkim' }
    : { type: 'TXT', name: dkimRecordName(d.dkim.selector, d.name), value: dkimTxtValue(d.dkim.algorithm, d.dkim.publicKey), purpose: 'dkim' });
  out.push({ type: 'TXT', name: `_dmarc.${d.name}`, value: `v=DMARC1; p=none; rua=mailto:dmarc-reports@${d.name}`, purpose: 'dmarc' });
  return out;
}

/** What one lookup gave: the values (TXT strings joined per record, CNAME targets) or why not. */
export type LookupFailure = 'nxdomain' | 'nodata' | 'servfail' | 'timeout' | 'error';
export type Lookup = { ok: true; values: string[] } | { ok: false; failure: LookupFailure };
export const lookupKey = (rrtype: 'TXT' | 'CNAME', name: string): string => `${rrtype} ${name.toLowerCase()}`;

/** The lookups needed to evaluate `records` (cname_managed DKIM needs the CNAME and the TXT behind it). */
export function lookupsFor(records: ExpectedRecord[]): Array<{ rrtype: 'TXT' | 'CNAME'; name: string }> {
  const seen = new Map<string, { rrtype: 'TXT' | 'CNAME'; name: string }>();
  for (const r of records) {
    seen.set(lookupKey(r.type, r.name), { rrtype: r.type, name: r.name });
    if (r.type === 'CNAME') seen.set(lookupKey('TXT', r.name), { rrtype: 'TXT', name: r.name });
  }
  return [...seen.values()];
}

const norm = (name: string): string => name.trim().replace(/\.$/, '').toLowerCase();

/** DKIM tag list (`v=DKIM1; k=rsa; p=...`) → tags; the p= value without white space. */
export function dkimTags(txt: string): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const part of txt.split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    tags[part.slice(0, eq).trim().toLowerCase()] = part.slice(eq + 1).replace(/\s+/g, '');
  }
  return tags;
}

/** What a lookup found, bounded (a name may carry many long TXT records). */
const shown = (values: string[]): string[] => values.slice(0, 10).map((v) => (v.length > 1024 ? `${v.slice(0, 1024)}…` : v));

const failed = (r: ExpectedRecord, failure: LookupFailure, missingReason: string): DomainRecordCheck => {
  if (failure === 'nxdomain' || failure === 'nodata') return { ...r, status: 'missing', reason: missingReason };
  return { ...r, status: 'error', reason: failure === 'servfail' ? 'dns_servfail' : failure === 'timeout' ? 'dns_timeout' : 'dns_error' };
};

function checkOwnership(r: ExpectedRecord, l: Lookup): DomainRecordCheck {
  if (!l.ok) return failed(r, l.failure, 'ownership_missing');
  if (l.values.some((v) => v.trim() === r.value)) return { ...r, status: 'ok' };
  const ours = l.values.filter((v) => v.trim().startsWith('motor-verification='));
  return ours.length === 0 ? { ...r, status: 'missing', reason: 'ownership_missing', ...(l.values.length ? { found: shown(l.values) } : {}) } : { ...r, status: 'mismatch', reason: 'ownership_token_mismatch', found: shown(ours) };
}

function checkSpf(r: ExpectedRecord, l: Lookup, serviceDomain: string): DomainRecordCheck {
  if (!l.ok) return failed(r, l.failure, 'spf_missing');
  const spf = l.values.filter((v) => /^v=spf1(\s|$)/i.test(v.trim()));
  if (spf.length === 0) return { ...r, status: 'missing', reason: 'spf_missing' };
  // RFC 7208 §4.5: more than one SPF record is a permerror, whatever they say.
  if (spf.length > 1) return { ...r, status: 'mismatch', reason: 'spf_multiple_records', found: shown(spf) };
  // The include, or a redirect to the service's record (which then is the whole policy). Receivers
  // never reach a mechanism after `all`, and ignore a redirect beside one (RFC 7208 §5.1, §6.1).
  const terms = spf[0].trim().split(/\s+/).slice(1).map((term) => term.toLowerCase().replace(/^\+/, ''));
  const all = terms.findIndex((term) => /^[-~?]?all$/.test(term));
  const has = (all === -1 ? terms : terms.slice(0, all)).includes(`include:${spfInclude(serviceDomain)}`.toLowerCase())
    || (all === -1 && terms.includes(`redirect=${spfInclude(serviceDomain)}`.toLowerCase()));
  return has ? { ...r, status: 'ok' } : { ...r, status: 'mismatch', reason: 'spf_include_missing', found: shown(spf) };
}

function checkDkimKey(r: ExpectedRecord, l: Lookup, publicKey: string, missingReason: string, mismatchReason: string): DomainRecordCheck {
  if (!l.ok) return failed(r, l.failure, missingReason);
  const keys = l.values.filter((v) => 'p' in dkimTags(v));
  if (keys.length === 0) return { ...r, status: 'missing', reason: missingReason, ...(l.values.length ? { found: shown(l.values) } : {}) };
  if (keys.some((v) => dkimTags(v).p === publicKey)) return { ...r, status: 'ok' };
  return { ...r, status: 'mismatch', reason: mismatchReason, found: shown(keys) };
}

function checkDmarc(r: ExpectedRecord, l: Lookup): DomainRecordCheck {
  if (!l.ok) return failed(r, l.failure, 'dmarc_missing');
  const dmarc = l.values.filter((v) => /^v=DMARC1\s*(;|$)/i.test(v.trim()));
  if (dmarc.length === 0) return { ...r, status: 'missing', reason: 'dmarc_missing', ...(l.values.length ? { found: shown(l.values) } : {}) };
  if (dmarc.length > 1) return { ...r, status: 'mismatch', reason: 'dmarc_multiple_records', found: shown(dmarc) };
  return { ...r, status: 'ok' };
}

/**
 * Evaluates every expected record against the lookups (keyed by `lookupKey`). A lookup that is
 * absent from `lookups` counts as a timeout (the check's time cap ran out before it answered).
 */
export function evaluateRecords(records: ExpectedRecord[], lookups: ReadonlyMap<string, Lookup>, ctx: { serviceDomain: string; publicKey: string }): DomainRecordCheck[] {
  const get = (rrtype: 'TXT' | 'CNAME', name: string): Lookup => lookups.get(lookupKey(rrtype, name)) ?? { ok: false, failure: 'timeout' };
  return records.map((r) => {
    switch (r.purpose) {
      case 'ownership': return checkOwnership(r, get('TXT', r.name));
      case 'spf': return checkSpf(r, get('TXT', r.name), ctx.serviceDomain);
      case 'dmarc': return checkDmarc(r, get('TXT', r.name));
      case 'dkim': {
        if (r.type === 'TXT') return checkDkimKey(r, get('TXT', r.name), ctx.publicKey, 'dkim_missing', 'dkim_key_mismatch');
        const cname = get('CNAME', r.name);
        if (!cname.ok) {
          const res = failed(r, cname.failure, 'dkim_cname_missing');
          // A TXT key pasted where the CNAME belongs is the usual mistake: show it.
          const txt = get('TXT', r.name);
          return res.status === 'missing' && txt.ok && txt.values.length ? { ...res, found: shown(txt.values) } : res;
        }
        if (!cname.values.map(norm).includes(norm(r.value))) return { ...r, status: 'mismatch', reason: 'dkim_cname_wrong_target', found: shown(cname.values.map(norm)) };
        // The CNAME is right; the key behind it is the service's to publish (docs/DOMAINS.md).
        return checkDkimKey(r, get('TXT', r.name), ctx.publicKey, 'dkim_key_not_published', 'dkim_key_not_published');
      }
    }
  });
}
