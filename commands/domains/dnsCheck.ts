import type { DomainRecordCheck } from '../../domain/events';
import { evaluateRecords, expectedRecords, lookupKey, lookupsFor, type ExpectedRecord, type Lookup, type LookupFailure } from '../../domain/sendingDomain/records';
import type { SendingDomain } from '../../domain/sendingDomain/sendingDomain';
import { classifyDnsError, type DnsResolver } from '../../workers/delivery/dns';

/**
 * The live DNS check of a sending domain: every lookup goes through the product's resolver
 * (DNS_SERVERS) in parallel, each capped at `timeoutMs`; what did not answer in time counts as
 * `dns_timeout`. The evaluation is pure (domain/sendingDomain/records.ts).
 */

export const recordsOf = (d: SendingDomain, serviceDomain: string): ExpectedRecord[] =>
  d.sandbox ? [] : expectedRecords({ domainId: d.domainId, name: d.name, serviceDomain, ownershipToken: d.ownershipToken, dkimMode: d.dkimMode, dkim: d.dkim });

function failureOf(err: unknown): LookupFailure {
  const kind = classifyDnsError(err);
  if (kind !== 'temporary') return kind;
  const code = String((err as { code?: unknown })?.code ?? '');
  if (code === 'ESERVFAIL') return 'servfail';
  if (code === 'ETIMEOUT') return 'timeout';
  return 'error';
}

async function lookup(resolver: DnsResolver, rrtype: 'TXT' | 'CNAME', name: string, timeoutMs: number): Promise<Lookup> {
  let timer: NodeJS.Timeout | undefined;
  const cap = new Promise<Lookup>((resolve) => { timer = setTimeout(() => resolve({ ok: false, failure: 'timeout' }), timeoutMs); });
  const query = (async (): Promise<Lookup> => {
    try {
      const values = rrtype === 'TXT' ? (await resolver.resolveTxt(name)).map((chunks) => chunks.join('')) : await resolver.resolveCname(name);
      return { ok: true, values };
    } catch (err) {
      return { ok: false, failure: failureOf(err) };
    }
  })();
  try {
    return await Promise.race([query, cap]);
  } finally {
    clearTimeout(timer);
  }
}

export interface DnsCheckResult { records: DomainRecordCheck[] }

/** Looks up the domain's records and says, per record, what is right or wrong. Never throws on DNS trouble. */
export async function checkDomainDns(resolver: DnsResolver, d: SendingDomain, opts: { serviceDomain: string; timeoutMs: number }): Promise<DnsCheckResult> {
  const records = recordsOf(d, opts.serviceDomain);
  // Once ownership is proven the token record may go: it is not looked up again.
  const toLook = d.ownershipVerified ? records.filter((r) => r.purpose !== 'ownership') : records;
  const wanted = lookupsFor(toLook);
  const results = await Promise.all(wanted.map(async (w) => [lookupKey(w.rrtype, w.name), await lookup(resolver, w.rrtype, w.name, opts.timeoutMs)] as const));
  const evaluated = evaluateRecords(toLook, new Map(results), { serviceDomain: opts.serviceDomain, publicKey: d.dkim.publicKey });
  return {
    records: records.map((r) => (r.purpose === 'ownership' && d.ownershipVerified ? { ...r, status: 'ok' as const } : evaluated.find((e) => e.purpose === r.purpose)!)),
  };
}
