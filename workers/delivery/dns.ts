import { Resolver } from 'node:dns/promises';

/**
 * Every DNS lookup of the product goes through this interface, so tests (and operators with
 * DNS_SERVERS) decide which servers answer. Lookups reject with a `DnsLookupError` whose `kind`
 * says whether the answer is definitive (`nxdomain`, `nodata`) or worth retrying (`temporary`).
 */
export interface DnsResolver {
  resolveMx(name: string): Promise<Array<{ exchange: string; priority: number }>>;
  /** One entry per TXT record, each the list of its character-strings (join them for the value). */
  resolveTxt(name: string): Promise<string[][]>;
  resolve4(name: string): Promise<string[]>;
  resolve6(name: string): Promise<string[]>;
  resolveCname(name: string): Promise<string[]>;
  /** Reverse lookups (SPF `ptr`, FCrDNS checks on inbound mail). */
  resolvePtr(name: string): Promise<string[]>;
}

/** `nxdomain`: the name does not exist; `nodata`: it exists without records of that type. */
export type DnsErrorKind = 'nxdomain' | 'nodata' | 'temporary';

export class DnsLookupError extends Error {
  /** The resolver's code (ENOTFOUND, ENODATA, ESERVFAIL, ETIMEOUT...), kept for mailauth. */
  readonly code: string;
  readonly kind: DnsErrorKind;
  readonly hostname: string;
  readonly rrtype: string;

  constructor(init: { code: string; kind: DnsErrorKind; hostname: string; rrtype: string; message: string }) {
    super(init.message);
    this.name = 'DnsLookupError';
    this.code = init.code;
    this.kind = init.kind;
    this.hostname = init.hostname;
    this.rrtype = init.rrtype;
  }
}

export const isDnsLookupError = (e: unknown): e is DnsLookupError => e instanceof DnsLookupError;

/** c-ares codes that are an authoritative "no" rather than a failure to get an answer. */
const DEFINITIVE: Record<string, DnsErrorKind> = {
  ENOTFOUND: 'nxdomain',
  ENODATA: 'nodata',
};

export function classifyDnsError(err: unknown): DnsErrorKind {
  if (err instanceof DnsLookupError) return err.kind;
  const code = (err as { code?: unknown } | null)?.code;
  return (typeof code === 'string' && DEFINITIVE[code]) || 'temporary';
}

export interface ResolverOptions {
  /** Time for one query attempt, in ms (c-ares doubles it on each retry). Default 5000. */
  timeoutMs?: number;
  /** Attempts per server before giving up. Default 2. */
  tries?: number;
}

/**
 * A resolver over `dnsServers` ("ip", "ip:port", "[v6]:port"; empty = the system's resolvers).
 * The servers must be recursive: CNAMEs are followed by them, not here.
 */
export function createResolver(dnsServers: string[], opts: ResolverOptions = {}): DnsResolver {
  const resolver = new Resolver({ timeout: opts.timeoutMs ?? 5000, tries: opts.tries ?? 2 });
  if (dnsServers.length > 0) resolver.setServers(dnsServers);

  const wrap =
    <T>(rrtype: string, lookup: (name: string) => Promise<T>) =>
    async (name: string): Promise<T> => {
      try {
        return await lookup(name);
      } catch (err) {
        const code = String((err as { code?: unknown }).code ?? 'EUNKNOWN');
        throw new DnsLookupError({
          code,
          kind: classifyDnsError(err),
          hostname: name,
          rrtype,
          message: `DNS ${rrtype} lookup for ${name} failed: ${code}`,
        });
      }
    };

  return {
    resolveMx: wrap('MX', (n) => resolver.resolveMx(n)),
    resolveTxt: wrap('TXT', (n) => resolver.resolveTxt(n)),
    resolve4: wrap('A', (n) => resolver.resolve4(n)),
    resolve6: wrap('AAAA', (n) => resolver.resolve6(n)),
    resolveCname: wrap('CNAME', (n) => resolver.resolveCname(n)),
    resolvePtr: wrap('PTR', (n) => resolver.resolvePtr(n)),
  };
}

/**
 * The `resolver(name, rrtype)` function mailauth's authenticate()/dkimVerify() take. Errors keep
 * the resolver's code, which is how mailauth tells "no record" (none/permerror) from temperror.
 */
export function mailauthResolver(resolver: DnsResolver): (name: string, rrtype: string) => Promise<any> {
  return async (name, rrtype) => {
    switch (rrtype.toUpperCase()) {
      case 'TXT':
        return resolver.resolveTxt(name);
      case 'MX':
        return resolver.resolveMx(name);
      case 'A':
        return resolver.resolve4(name);
      case 'AAAA':
        return resolver.resolve6(name);
      case 'CNAME':
        return resolver.resolveCname(name);
      case 'PTR':
        return resolver.resolvePtr(name);
      default:
        throw new DnsLookupError({ code: 'ENOTIMP', kind: 'temporary', hostname: name, rrtype, message: `DNS ${rrtype} lookups are not supported` });
    }
  };
}
