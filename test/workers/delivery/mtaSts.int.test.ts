import { expect } from 'chai';
import { rootCertificates } from 'node:tls';
import { startDnsServer, type TestDnsServer } from '../../support/dnsServer.js';
import { startPolicyServer, type PolicyServer } from '../../support/mtaStsServer.js';
import { testCertificate } from '../../support/smtpSink.js';
import { issuedCertificate, testCa } from '../../support/testCa.js';
import { cachingResolver, createResolver } from '../../../workers/delivery/dns.js';
import { MIN_POLICY_KEEP_SECONDS, MtaStsPolicies, type MtaStsEvent, type MtaStsSettings } from '../../../workers/delivery/mtaSts.js';

const POLICY = 'version: STSv1\nmode: enforce\nmx: mx.rcpt.test\nmax_age: 3600\n';

describe('MTA-STS policy discovery and cache (loopback DNS + HTTPS policy host)', function () {
  this.timeout(20_000);
  let dns: TestDnsServer;
  let server: PolicyServer;
  let selfSigned: PolicyServer;
  const ca = [...rootCertificates, testCa().cert.toString()];

  before(async () => {
    server = await startPolicyServer(issuedCertificate(['mta-sts.rcpt.test', 'mta-sts.other.test', 'mta-sts.private.test']));
    selfSigned = await startPolicyServer(testCertificate());
    dns = await startDnsServer({
      '_mta-sts.rcpt.test': { TXT: ['v=STSv1; id=one;'] },
      'mta-sts.rcpt.test': { A: ['127.0.0.1'] },
      'mta-sts.private.test': { A: ['127.0.0.1'] },
      '_mta-sts.private.test': { TXT: ['v=STSv1; id=p1;'] },
    });
  });
  after(async () => {
    await Promise.all([dns.close(), server.close(), selfSigned.close()]);
  });

  let now = 1_000_000;
  let events: MtaStsEvent[] = [];
  beforeEach(() => {
    now = 1_000_000;
    events = [];
    server.requests.length = 0;
    server.setPolicy('mta-sts.rcpt.test', POLICY);
    dns.setRecords('_mta-sts.rcpt.test', { TXT: ['v=STSv1; id=one;'] });
  });
  const kinds = () => events.map((e) => e.kind);
  const policies = (overrides: Partial<MtaStsSettings> = {}) => new MtaStsPolicies({
    resolver: createResolver([dns.address], { timeoutMs: 2000, tries: 1 }), port: server.port, allowPrivateAddresses: true, ca,
    now: () => now, onEvent: (e) => events.push(e), ...overrides,
  });

  it('fetches the policy named by the TXT record over HTTPS and keeps it while the id is unchanged', async () => {
    const p = policies();
    expect(await p.policyFor('rcpt.test')).to.deep.equal({ id: 'one', mode: 'enforce', mx: ['mx.rcpt.test'], maxAgeSeconds: 3600 });
    expect(await p.policyFor('RCPT.test')).to.include({ id: 'one' });
    expect(server.requests).to.deep.equal([{ host: 'mta-sts.rcpt.test', path: '/.well-known/mta-sts.txt' }]);
    expect(events.map((e) => e.kind)).to.deep.equal(['fetched', 'cached']);
  });

  it('shares one fetch, and one event, between deliveries to a domain at the same moment', async () => {
    const p = policies();
    const got = await Promise.all([p.policyFor('rcpt.test'), p.policyFor('rcpt.test'), p.policyFor('rcpt.test')]);
    expect(got.map((g) => g?.id)).to.deep.equal(['one', 'one', 'one']);
    expect(server.count('mta-sts.rcpt.test')).to.equal(1);
    expect(kinds()).to.deep.equal(['fetched']);
  });

  it('fetches again when the id changes, and keeps the cached policy when that fetch fails', async () => {
    const p = policies();
    await p.policyFor('rcpt.test');
    dns.setRecords('_mta-sts.rcpt.test', { TXT: ['v=STSv1; id=two;'] });
    server.setPolicy('mta-sts.rcpt.test', POLICY.replace('enforce', 'testing'));
    expect(await p.policyFor('rcpt.test')).to.include({ id: 'two', mode: 'testing' });
    expect(server.count('mta-sts.rcpt.test')).to.equal(2);

    dns.setRecords('_mta-sts.rcpt.test', { TXT: ['v=STSv1; id=three;'] });
    server.setPolicy('mta-sts.rcpt.test', { status: 500, body: 'oops' });
    expect(await p.policyFor('rcpt.test')).to.include({ id: 'two', mode: 'testing' });
    expect(events.at(-1)).to.deep.include({ kind: 'fetch_failed', domain: 'rcpt.test', kept: true });
    // A failed id is not fetched again at once (one timeout per broken host, not one per message).
    expect(await p.policyFor('rcpt.test')).to.include({ id: 'two' });
    expect(server.count('mta-sts.rcpt.test')).to.equal(3);
    now += 301_000;
    server.setPolicy('mta-sts.rcpt.test', POLICY);
    expect(await p.policyFor('rcpt.test')).to.include({ id: 'three', mode: 'enforce' });
  });

  it('keeps applying a cached policy when the TXT record disappears, until max_age passes', async () => {
    const p = policies();
    await p.policyFor('rcpt.test');
    dns.setRecords('_mta-sts.rcpt.test', {});
    now += 3_599_000;
    expect(await p.policyFor('rcpt.test')).to.include({ id: 'one' });
    now += 2000;
    expect(await p.policyFor('rcpt.test')).to.equal(null);
    expect(server.count('mta-sts.rcpt.test')).to.equal(1);
  });

  it(`keeps a policy with max_age 0 for ${MIN_POLICY_KEEP_SECONDS} s rather than fetching it for every delivery, and shares that fetch`, async () => {
    server.setPolicy('mta-sts.rcpt.test', POLICY.replace('max_age: 3600', 'max_age: 0'));
    const p = policies();
    const first = await Promise.all([p.policyFor('rcpt.test'), p.policyFor('rcpt.test')]);
    expect(first.map((g) => g?.maxAgeSeconds)).to.deep.equal([0, 0]);
    now += MIN_POLICY_KEEP_SECONDS * 1000 - 1000;
    expect(await p.policyFor('rcpt.test')).to.include({ id: 'one', maxAgeSeconds: 0 });
    expect(server.count('mta-sts.rcpt.test')).to.equal(1);
    expect(kinds()).to.deep.equal(['fetched', 'cached']);
    now += 2000;
    expect(await p.policyFor('rcpt.test')).to.include({ id: 'one' });
    expect(server.count('mta-sts.rcpt.test')).to.equal(2);
  });

  it('has no policy without a TXT record, with two, or for an address literal, and asks no policy host', async () => {
    const p = policies();
    expect(await p.policyFor('nosts.test')).to.equal(null);
    dns.setRecords('_mta-sts.rcpt.test', { TXT: ['v=STSv1; id=a;', 'v=STSv1; id=b;'] });
    expect(await p.policyFor('rcpt.test')).to.equal(null);
    expect(await p.policyFor('[127.0.0.1]')).to.equal(null);
    expect(server.requests).to.deep.equal([]);
    expect(events).to.deep.equal([]);
  });

  it('through the delivery worker\'s cachingResolver, asks TXT _mta-sts at most once a minute per domain, with a policy or without', async () => {
    const p = policies({ resolver: cachingResolver(createResolver([dns.address], { timeoutMs: 2000, tries: 1 }), { now: () => now }) });
    const before = dns.queries.length;
    const asked = (name: string) => dns.queries.slice(before).filter((q) => q.name === name && q.type === 'TXT').length;
    const round = () => Promise.all([p.policyFor('rcpt.test'), p.policyFor('rcpt.test'), p.policyFor('quiet.test'), p.policyFor('quiet.test')]);
    expect((await round()).map((g) => g?.id ?? null)).to.deep.equal(['one', 'one', null, null]);
    now += 59_000;
    expect((await round()).map((g) => g?.id ?? null)).to.deep.equal(['one', 'one', null, null]);
    expect([asked('_mta-sts.rcpt.test'), asked('_mta-sts.quiet.test')]).to.deep.equal([1, 1]);
    now += 2_000;
    await round();
    expect([asked('_mta-sts.rcpt.test'), asked('_mta-sts.quiet.test')]).to.deep.equal([2, 2]);
    expect(server.count('mta-sts.rcpt.test')).to.equal(1);
  });

  it('asks again after a SERVFAIL on the record (not kept), applying the kept policy meanwhile', async () => {
    const p = policies({ resolver: cachingResolver(createResolver([dns.address], { timeoutMs: 2000, tries: 1 }), { now: () => now }) });
    await p.policyFor('rcpt.test');
    now += 61_000;
    dns.setFailure('_mta-sts.rcpt.test', 'servfail');
    const asked = () => dns.queries.filter((q) => q.name === '_mta-sts.rcpt.test' && q.type === 'TXT').length;
    try {
      const before = asked();
      expect(await p.policyFor('rcpt.test')).to.include({ id: 'one' });
      const afterFailure = asked();
      expect(await p.policyFor('rcpt.test')).to.include({ id: 'one' });
      expect(afterFailure).to.be.above(before);
      expect(asked(), 'the failure was not kept').to.be.above(afterFailure);
    } finally {
      dns.setFailure('_mta-sts.rcpt.test', null);
    }
    expect(server.count('mta-sts.rcpt.test')).to.equal(1);
  });

  const refused = async (answer: Parameters<PolicyServer['setPolicy']>[1], detail: RegExp, overrides: Partial<MtaStsSettings> = {}) => {
    server.setPolicy('mta-sts.rcpt.test', answer);
    expect(await policies(overrides).policyFor('rcpt.test')).to.equal(null);
    const failed = events.find((e) => e.kind === 'fetch_failed');
    expect(failed, JSON.stringify(events)).to.not.equal(undefined);
    expect((failed as { detail: string }).detail).to.match(detail);
  };

  it('does not follow a redirect', async () => {
    server.setPolicy('mta-sts.other.test', POLICY);
    await refused({ status: 301, headers: { location: `https://mta-sts.other.test:${server.port}/.well-known/mta-sts.txt` } }, /answered 301 \(redirects are not followed\)/);
    expect(server.count('mta-sts.other.test')).to.equal(0);
  });

  it('refuses a policy over 64 KiB, another media type, a malformed policy', async () => {
    await refused(`${POLICY}${'x_pad: y\n'.repeat(8000)}`, /over 65536 bytes/);
    events = [];
    await refused({ body: POLICY, contentType: 'text/html' }, /media type is text\/html/);
    events = [];
    await refused(POLICY.replace('STSv1', 'STSv2'), /malformed: version/);
  });

  it('refuses a policy host whose certificate is not valid for its name', async () => {
    await refused(POLICY, /policy fetch from mta-sts.rcpt.test failed: .*(SELF_SIGNED|self-signed)/i, { port: selfSigned.port });
    expect(selfSigned.requests).to.deep.equal([]);
  });

  it('does not fetch from a non-public address unless MX_ALLOW_PRIVATE_ADDRESSES', async () => {
    const p = policies({ allowPrivateAddresses: false });
    expect(await p.policyFor('private.test')).to.equal(null);
    expect(events[0]).to.deep.include({ kind: 'fetch_failed', domain: 'private.test' });
    expect((events[0] as { detail: string }).detail).to.match(/non-public addresses \(127\.0\.0\.1\)/);
    expect(server.requests).to.deep.equal([]);
  });

  it('gives up on a policy host that does not answer within the timeout', async () => {
    server.setPolicy('mta-sts.rcpt.test', POLICY);
    const { createServer } = await import('node:net');
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const started = Date.now();
      await refused(POLICY, /timed out/, { port: (silent.address() as { port: number }).port, timeoutMs: 300 });
      expect(Date.now() - started).to.be.below(2000);
    } finally {
      silent.close();
    }
  });
});
