import { expect } from 'chai';
import { startDnsServer, type TestDnsServer } from '../../support/dnsServer.js';
import { createResolver, type DnsResolver } from '../../../workers/delivery/dns.js';
import { resolveHostAddresses, resolveMxHosts } from '../../../workers/delivery/mx.js';

/** A deterministic "random" source: returns the given values in turn. */
const sequence = (...values: number[]) => {
  let i = 0;
  return () => values[i++ % values.length];
};

describe('MX resolution', () => {
  let dns: TestDnsServer;
  let resolver: DnsResolver;

  before(async () => {
    dns = await startDnsServer({
      'multi.test': {
        MX: [
          { exchange: 'backup.multi.test', priority: 20 },
          { exchange: 'a.multi.test.', priority: 10 },
          { exchange: 'B.multi.test', priority: 10 },
        ],
      },
      'bare.test': { A: ['192.0.2.10'], AAAA: ['2001:db8::10'] },
      'v6only.test': { AAAA: ['2001:db8::20'] },
      'txtonly.test': { TXT: ['hello'] },
      'nullmx.test': { MX: [{ exchange: '.', priority: 0 }] },
      'dual.host.test': { A: ['192.0.2.1', '192.0.2.2'], AAAA: ['2001:db8::1'] },
    });
    resolver = createResolver([dns.address], { timeoutMs: 5000, tries: 1 });
  });
  after(() => dns.close());

  it('orders MX hosts by priority, normalised (lower case, no trailing dot)', async () => {
    const r = await resolveMxHosts(resolver, 'multi.test', { random: sequence(0.1, 0.2, 0.3) });
    expect(r).to.deep.equal({
      kind: 'hosts',
      implicit: false,
      hosts: [
        { exchange: 'a.multi.test', priority: 10 },
        { exchange: 'b.multi.test', priority: 10 },
        { exchange: 'backup.multi.test', priority: 20 },
      ],
    });
  });

  it('shuffles hosts of equal priority (using the injected random source) but never across priorities', async () => {
    const r = await resolveMxHosts(resolver, 'multi.test', { random: sequence(0.9, 0.5, 0.1) });
    // keys: backup=0.9, a=0.5, B=0.1 → b before a; backup stays last whatever its key.
    expect(r.kind === 'hosts' && r.hosts.map((h) => h.exchange)).to.deep.equal(['b.multi.test', 'a.multi.test', 'backup.multi.test']);
  });

  it('falls back to the domain itself when it has no MX but has an address (RFC 5321 §5.1)', async () => {
    expect(await resolveMxHosts(resolver, 'bare.test')).to.deep.equal({ kind: 'hosts', implicit: true, hosts: [{ exchange: 'bare.test', priority: 0 }] });
    expect(await resolveMxHosts(resolver, 'v6only.test')).to.deep.include({ kind: 'hosts', implicit: true });
  });

  it('fails permanently for a null MX, a domain that does not exist, or one without MX and address', async () => {
    expect(await resolveMxHosts(resolver, 'nullmx.test')).to.include({ kind: 'permanent', reason: 'null_mx' });
    expect(await resolveMxHosts(resolver, 'nowhere.test')).to.include({ kind: 'permanent', reason: 'no_such_domain' });
    expect(await resolveMxHosts(resolver, 'txtonly.test')).to.include({ kind: 'permanent', reason: 'no_mail_host' });
  });

  it('fails temporarily when DNS does (SERVFAIL or no answer), for the MX and for the fallback', async () => {
    dns.setFailure('broken.test', 'servfail');
    expect(await resolveMxHosts(resolver, 'broken.test')).to.include({ kind: 'temporary', reason: 'dns_temporary' });
    dns.setFailure('broken.test', 'timeout');
    // A resolver that gives up after 300 ms (the shared one waits long enough for a busy machine).
    expect(await resolveMxHosts(createResolver([dns.address], { timeoutMs: 300, tries: 1 }), 'broken.test')).to.include({ kind: 'temporary', reason: 'dns_temporary' });
    dns.setRecords('halfbroken.test', { TXT: ['x'] });
    const realResolve4 = resolver.resolve4;
    const failingA: DnsResolver = { ...resolver, resolve4: (n) => (n === 'halfbroken.test' ? Promise.reject(Object.assign(new Error('x'), { code: 'ESERVFAIL' })) : realResolve4(n)) };
    expect(await resolveMxHosts(failingA, 'halfbroken.test')).to.include({ kind: 'temporary' });
  });

  it('resolves a host to its IPv4 then IPv6 addresses; IP literals pass through', async () => {
    expect(await resolveHostAddresses(resolver, 'dual.host.test')).to.deep.equal({ kind: 'addresses', addresses: ['192.0.2.1', '192.0.2.2', '2001:db8::1'] });
    expect(await resolveHostAddresses(resolver, '[192.0.2.55]')).to.deep.equal({ kind: 'addresses', addresses: ['192.0.2.55'] });
    expect(await resolveHostAddresses(resolver, 'nohost.test')).to.include({ kind: 'permanent' });
    dns.setFailure('sick.host.test', 'servfail');
    expect(await resolveHostAddresses(resolver, 'sick.host.test')).to.include({ kind: 'temporary' });
  });
});
