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
  /** A / AAAA with the records' TTLs (seconds), when the implementation knows them (caching). */
  resolveAddressesTtl?(rrtype: 'A' | 'AAAA', name: string): Promise<Array<{ address: string; ttl: number }>>;
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
    // Node 24 adds `type: 'MX'` to each record: the port's records are exchange and priority only.
    resolveMx: wrap('MX', async (n) => (await resolver.resolveMx(n)).map(({ exchange, priority }) => ({ exchange, priority }))),
    resolveTxt: wrap('TXT', (n) => resolver.resolveTxt(n)),
    resolve4: wrap('A', (n) => resolver.resolve4(n)),
    resolve6: wrap('AAAA', (n) => resolver.resolve6(n)),
    resolveCname: wrap('CNAME', (n) => resolver.resolveCname(n)),
    resolvePtr: wrap('PTR', (n) => resolver.resolvePtr(n)),
    resolveAddressesTtl: (rrtype, name) =>
      rrtype === 'A'
        ? wrap('A', (n) => resolver.resolve4(n, { ttl: true }))(name)
        : wrap('AAAA', (n) => resolver.resolve6(n, { ttl: true }))(name),
  };
}

export interface CacheOptions {
  /** Longest time an answer is kept, ms (default 60 s; MX and TXT answers carry no TTL in Node: always this). */
  maxTtlMs?: number;
  /** How long NXDOMAIN / NODATA is kept for MX, A, AAAA, ms (default 5 s). Temporary errors are never cached. */
  negativeTtlMs?: number;
  /**
   * How long NXDOMAIN / NODATA is kept for TXT, ms (default `maxTtlMs`). Most recipient domains
   * publish no `_mta-sts` record: that "no" is the usual answer, and asked for every message.
   */
  txtNegativeTtlMs?: number;
  /** Entries kept at most (default 10,000; the oldest go first). */
  maxEntries?: number;
  now?: () => number;
}

/**
 * A small TTL cache in front of the delivery lookups (MX, A, AAAA, and TXT for MTA-STS): the same
 * answer for every message to a domain for up to `maxTtlMs` (A/AAAA: the record TTL when shorter).
 * Definitive negative answers are kept `negativeTtlMs` (TXT: `txtNegativeTtlMs`); temporary
 * failures (SERVFAIL, timeout) are not kept. Concurrent lookups of the same name share one query.
 * CNAME and PTR pass through. Only the delivery worker uses it: the domain checks, where an owner
 * has just published a record, ask the uncached resolver.
 */
export function cachingResolver(inner: DnsResolver, opts: CacheOptions = {}): DnsResolver {
  const maxTtl = opts.maxTtlMs ?? 60_000;
  const negTtl = opts.negativeTtlMs ?? 5_000;
  const txtNegTtl = opts.txtNegativeTtlMs ?? maxTtl;
  const maxEntries = opts.maxEntries ?? 10_000;
  const now = opts.now ?? Date.now;
  type Entry = { expires: number; value?: unknown; error?: unknown; pending?: Promise<unknown> };
  const cache = new Map<string, Entry>();

  const cached = <T>(rrtype: string, name: string, lookup: () => Promise<{ value: T; ttlMs: number }>): Promise<T> => {
    const key = `${rrtype} ${name.toLowerCase()}`;
    const hit = cache.get(key);
    const t = now();
    if (hit) {
      if (hit.pending) return hit.pending as Promise<T>;
      if (hit.expires > t) return hit.error !== undefined ? Promise.reject(hit.error) : Promise.resolve(hit.value as T);
      cache.delete(key);
    }
    const pending = lookup().then(
      ({ value, ttlMs }) => {
        store(key, { expires: now() + Math.min(maxTtl, ttlMs), value });
        return value;
      },
      (err: unknown) => {
        if (classifyDnsError(err) === 'temporary') cache.delete(key);
        else store(key, { expires: now() + (rrtype === 'TXT' ? txtNegTtl : negTtl), error: err });
        throw err;
      },
    );
    cache.set(key, { expires: Infinity, pending });
    return pending;
  };
  const store = (key: string, e: Entry): void => {
    cache.delete(key);
    if (cache.size >= maxEntries) cache.delete(cache.keys().next().value as string);
    cache.set(key, e);
  };
  const addresses = (rrtype: 'A' | 'AAAA', name: string): Promise<string[]> =>
    cached(rrtype, name, async () => {
      if (inner.resolveAddressesTtl) {
        const records = await inner.resolveAddressesTtl(rrtype, name);
        const ttl = records.length > 0 ? Math.min(...records.map((r) => r.ttl)) * 1000 : maxTtl;
        return { value: records.map((r) => r.address), ttlMs: ttl };
      }
      return { value: await (rrtype === 'A' ? inner.resolve4(name) : inner.resolve6(name)), ttlMs: maxTtl };
    });

  return {
    resolveMx: (name) => cached('MX', name, async () => ({ value: await inner.resolveMx(name), ttlMs: maxTtl })),
    resolve4: (name) => addresses('A', name),
    resolve6: (name) => addresses('AAAA', name),
    resolveTxt: (name) => cached('TXT', name, async () => ({ value: await inner.resolveTxt(name), ttlMs: maxTtl })),
    resolveCname: (name) => inner.resolveCname(name),
    resolvePtr: (name) => inner.resolvePtr(name),
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
