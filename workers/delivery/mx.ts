import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { classifyDnsError, type DnsResolver } from './dns.js';

export interface MxHost {
  exchange: string;
  priority: number;
}

/** Why a domain cannot receive mail at all (permanent) or not right now (temporary). */
export type MxFailureReason = 'null_mx' | 'no_such_domain' | 'no_mail_host' | 'dns_temporary';

export type MxResolution =
  | { kind: 'hosts'; hosts: MxHost[]; /** true when no MX exists and the domain itself is the host (RFC 5321 §5.1) */ implicit: boolean }
  | { kind: 'permanent'; reason: Exclude<MxFailureReason, 'dns_temporary'>; message: string }
  | { kind: 'temporary'; reason: 'dns_temporary'; message: string };

export type AddressResolution =
  | { kind: 'addresses'; addresses: string[] }
  | { kind: 'permanent'; message: string }
  | { kind: 'temporary'; message: string };

/**
 * A domain as DNS and SMTP take it: lower case, no final dot, an internationalized name as its
 * A-labels (RFC 5890: `bücher.example` is `xn--bcher-kva.example`; the resolver would send the
 * UTF-8 bytes as they are and find nothing). '' when the name cannot be one.
 */
export function asciiDomain(name: string): string {
  const n = name.trim().replace(/\.$/, '').toLowerCase();
  return /^[\x00-\x7f]*$/.test(n) ? n : domainToASCII(n);
}

/** An address as an SMTP envelope carries it: its domain in A-labels (its local part as it is). */
export function envelopeAddress(address: string): string {
  const at = address.lastIndexOf('@');
  if (at === -1 || /^[\x00-\x7f]*$/.test(address.slice(at + 1))) return address;
  const domain = asciiDomain(address.slice(at + 1));
  return domain === '' ? address : `${address.slice(0, at)}@${domain}`;
}

/** The IP of an address literal (`[192.0.2.1]`, `[IPv6:2001:db8::1]`); anything else as it is. */
const literalAddress = (name: string): string => name.replace(/^\[(?:ipv6:)?(.*)\]$/i, '$1');

/**
 * The hosts to try for `domain`, best first: MX records by priority, shuffled among equal
 * priorities so load spreads as the domain's owner intends. Without MX records the domain's own
 * A/AAAA is the implicit MX; a null MX (`0 .`, RFC 7505) means the domain takes no mail.
 * `random` is injectable so tests can pin the order.
 */
export async function resolveMxHosts(resolver: DnsResolver, domain: string, opts: { random?: () => number } = {}): Promise<MxResolution> {
  const name = asciiDomain(domain);
  if (name === '') return { kind: 'permanent', reason: 'no_such_domain', message: `Domain ${domain} is not a valid domain name` };
  if (name.startsWith('[')) {
    // An address literal (user@[192.0.2.1]) names the host itself, no MX lookup (RFC 5321 §5.1).
    if (!isIP(literalAddress(name))) return { kind: 'permanent', reason: 'no_such_domain', message: `${domain} is not a valid address literal` };
    return { kind: 'hosts', hosts: [{ exchange: name, priority: 0 }], implicit: true };
  }
  const random = opts.random ?? Math.random;
  let records: MxHost[];
  try {
    records = await resolver.resolveMx(name);
  } catch (err) {
    const kind = classifyDnsError(err);
    if (kind === 'temporary') return { kind: 'temporary', reason: 'dns_temporary', message: `MX lookup for ${name} failed: ${errMessage(err)}` };
    if (kind === 'nxdomain') return { kind: 'permanent', reason: 'no_such_domain', message: `Domain ${name} does not exist` };
    records = [];
  }

  const hosts = records.map((r) => ({ exchange: asciiDomain(r.exchange), priority: r.priority }));
  if (hosts.some((h) => h.exchange === '')) {
    // RFC 7505 §3: a null MX must be the only record; either way the domain declares it takes no mail.
    return { kind: 'permanent', reason: 'null_mx', message: `Domain ${name} does not accept mail (null MX)` };
  }

  if (hosts.length === 0) {
    const addresses = await resolveHostAddresses(resolver, name);
    if (addresses.kind === 'temporary') return { kind: 'temporary', reason: 'dns_temporary', message: addresses.message };
    if (addresses.kind === 'permanent') return { kind: 'permanent', reason: 'no_mail_host', message: `Domain ${name} has no MX and no A/AAAA record` };
    return { kind: 'hosts', hosts: [{ exchange: name, priority: 0 }], implicit: true };
  }

  const keyed = hosts.map((h) => ({ h, k: random() }));
  keyed.sort((a, b) => a.h.priority - b.h.priority || a.k - b.k);
  return { kind: 'hosts', hosts: keyed.map((x) => x.h), implicit: false };
}

/**
 * The IP addresses of an MX host (IPv4 first, then IPv6). Delivery connects to these directly:
 * nodemailer's own lookup ignores the configured DNS servers.
 */
export async function resolveHostAddresses(resolver: DnsResolver, host: string): Promise<AddressResolution> {
  const name = asciiDomain(host);
  const literal = literalAddress(name);
  if (isIP(literal)) return { kind: 'addresses', addresses: [literal] };

  const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
  const addresses = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
  if (addresses.length > 0) return { kind: 'addresses', addresses };

  const failures = [v4, v6].flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
  const temporary = failures.find((e) => classifyDnsError(e) === 'temporary');
  if (temporary) return { kind: 'temporary', message: `Address lookup for ${name} failed: ${errMessage(temporary)}` };
  return { kind: 'permanent', message: `Host ${name} has no A/AAAA record` };
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
