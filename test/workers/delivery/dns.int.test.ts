import { expect } from 'chai';
import { startDnsServer, type TestDnsServer } from '../../support/dnsServer.js';
import { createResolver, DnsLookupError, mailauthResolver, type DnsResolver } from '../../../workers/delivery/dns.js';

async function lookupError(p: Promise<unknown>): Promise<DnsLookupError> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(DnsLookupError);
    return err as DnsLookupError;
  }
  throw new Error('expected the lookup to fail');
}

describe('dns resolver against the loopback DNS server', () => {
  let dns: TestDnsServer;
  let resolver: DnsResolver;
  const longTxt = `v=DKIM1; k=rsa; p=${'M'.repeat(2000)}`;

  before(async () => {
    dns = await startDnsServer({
      'example.test': {
        MX: [{ exchange: 'mx1.example.test', priority: 10 }],
        TXT: ['v=spf1 -all', longTxt],
        A: ['192.0.2.1'],
        AAAA: ['2001:db8::1'],
      },
      'alias.example.test': { CNAME: 'example.test' },
      '1.2.0.192.in-addr.arpa': { PTR: ['host.example.test'] },
    });
    resolver = createResolver([dns.address], { timeoutMs: 5000, tries: 1 });
  });
  after(() => dns.close());

  it('answers MX, A, AAAA, CNAME and PTR', async () => {
    expect(await resolver.resolveMx('example.test')).to.deep.equal([{ exchange: 'mx1.example.test', priority: 10 }]);
    expect(await resolver.resolve4('example.test')).to.deep.equal(['192.0.2.1']);
    expect(await resolver.resolve6('example.test')).to.deep.equal(['2001:db8::1']);
    expect(await resolver.resolveCname('alias.example.test')).to.deep.equal(['example.test']);
    expect(await resolver.resolvePtr('1.2.0.192.in-addr.arpa')).to.deep.equal(['host.example.test']);
  });

  it('serves a TXT record longer than 255 bytes as several strings that join back (over TCP when UDP truncates)', async () => {
    const records = await resolver.resolveTxt('example.test');
    const long = records.find((r) => r.join('').startsWith('v=DKIM1'))!;
    expect(long.length).to.equal(8);
    expect(long.every((s) => Buffer.byteLength(s) <= 255)).to.equal(true);
    expect(long.join('')).to.equal(longTxt);
    expect(dns.queries.filter((q) => q.name === 'example.test' && q.type === 'TXT').map((q) => q.transport)).to.include('tcp');
  });

  it('follows a CNAME for address lookups, as a recursive server does', async () => {
    expect(await resolver.resolve4('alias.example.test')).to.deep.equal(['192.0.2.1']);
  });

  it('classifies NXDOMAIN and NODATA as definitive answers', async () => {
    const nx = await lookupError(resolver.resolve4('missing.example.test'));
    expect(nx).to.include({ kind: 'nxdomain', code: 'ENOTFOUND', rrtype: 'A', hostname: 'missing.example.test' });
    const nodata = await lookupError(resolver.resolveMx('1.2.0.192.in-addr.arpa'));
    expect(nodata).to.include({ kind: 'nodata', code: 'ENODATA' });
  });

  it('classifies SERVFAIL and timeouts as temporary, and lets records change while running', async () => {
    dns.setRecords('flaky.test', { A: ['192.0.2.9'] });
    expect(await resolver.resolve4('flaky.test')).to.deep.equal(['192.0.2.9']);
    dns.setFailure('flaky.test', 'servfail');
    expect(await lookupError(resolver.resolve4('flaky.test'))).to.include({ kind: 'temporary', code: 'ESERVFAIL' });
    dns.setFailure('flaky.test', 'timeout');
    const started = Date.now();
    // A resolver that gives up after 300 ms (the shared one waits long enough for a busy machine).
    const impatient = createResolver([dns.address], { timeoutMs: 300, tries: 1 });
    expect(await lookupError(impatient.resolve4('flaky.test'))).to.include({ kind: 'temporary', code: 'ETIMEOUT' });
    expect(Date.now() - started).to.be.below(3000);
    dns.setFailure('flaky.test', null);
    dns.removeName('flaky.test');
    expect(await lookupError(resolver.resolve4('flaky.test'))).to.include({ kind: 'nxdomain' });
  });

  it('adapts to mailauth: TXT answers as string lists, errors keep their resolver code', async () => {
    const lookup = mailauthResolver(resolver);
    const txt = (await lookup('example.test', 'TXT')) as string[][];
    expect(txt.map((r) => r.join(''))).to.include('v=spf1 -all');
    let code: unknown;
    await lookup('missing.example.test', 'TXT').catch((e: { code: string }) => (code = e.code));
    expect(code).to.equal('ENOTFOUND');
  });

  it('records the questions it was asked', () => {
    expect(dns.queries).to.deep.include({ name: 'example.test', type: 'MX', transport: 'udp' });
  });
});
