import { expect } from 'chai';
import { rootCertificates } from 'node:tls';
import { startDnsServer, type TestDnsServer } from '../../support/dnsServer.js';
import { startPolicyServer, type PolicyServer } from '../../support/mtaStsServer.js';
import { startSmtpSink, type SmtpSink, type SmtpSinkOptions } from '../../support/smtpSink.js';
import { issuedCertificate, testCa } from '../../support/testCa.js';
import { SmtpConnectionPool } from '../../../workers/delivery/connectionPool.js';
import { createResolver, type DnsResolver } from '../../../workers/delivery/dns.js';
import { MtaStsPolicies, type MtaStsEvent } from '../../../workers/delivery/mtaSts.js';
import { deliverMessage, type RecipientResult } from '../../../workers/delivery/smtpClient.js';

const timeouts = { connectMs: 2000, greetingMs: 2000, socketMs: 5000 };
const policy = (mode: string, ...mx: string[]) => `version: STSv1\nmode: ${mode}\n${mx.map((m) => `mx: ${m}\n`).join('')}max_age: 86400\n`;

/**
 * Delivery under MTA-STS policies: loopback DNS (MX, A, the _mta-sts TXT records), an HTTPS policy
 * host and SMTP sinks presenting certificates of a test CA (valid for their MX name) or not.
 */
describe('delivery under MTA-STS (loopback DNS, HTTPS policy host, SMTP sinks)', function () {
  this.timeout(20_000);
  let dns: TestDnsServer;
  let resolver: DnsResolver;
  let policies: PolicyServer;
  let events: MtaStsEvent[];
  let sts: MtaStsPolicies;
  const sinks: SmtpSink[] = [];
  const sink = async (opts: SmtpSinkOptions = {}): Promise<SmtpSink> => {
    const s = await startSmtpSink(opts);
    sinks.push(s);
    return s;
  };
  const validFor = (name: string) => ({ tls: issuedCertificate([name]) });
  const domains = ['enforce.test', 'testing.test', 'none.test'];

  before(async () => {
    policies = await startPolicyServer(issuedCertificate(domains.map((d) => `mta-sts.${d}`)));
    const zones: Parameters<typeof startDnsServer>[0] = { 'nosts.test': { MX: [{ exchange: 'mx.enforce.test', priority: 10 }] } };
    for (const d of domains) {
      zones[d] = { MX: [{ exchange: `mx.${d}`, priority: 10 }] };
      zones[`mx.${d}`] = { A: ['127.0.0.1'] };
      zones[`mta-sts.${d}`] = { A: ['127.0.0.1'] };
      zones[`_mta-sts.${d}`] = { TXT: ['v=STSv1; id=1;'] };
    }
    zones['mx.elsewhere.test'] = { A: ['127.0.0.1'] };
    zones['relay.test'] = { A: ['127.0.0.1'] };
    dns = await startDnsServer(zones);
    resolver = createResolver([dns.address], { timeoutMs: 2000, tries: 1 });
  });
  after(async () => {
    await Promise.all([dns.close(), policies.close()]);
  });
  beforeEach(() => {
    events = [];
    policies.requests.length = 0;
    policies.setPolicy('mta-sts.enforce.test', policy('enforce', 'mx.enforce.test'));
    policies.setPolicy('mta-sts.testing.test', policy('testing', 'mx.testing.test'));
    policies.setPolicy('mta-sts.none.test', policy('none'));
    dns.setRecords('enforce.test', { MX: [{ exchange: 'mx.enforce.test', priority: 10 }] });
    dns.setRecords('testing.test', { MX: [{ exchange: 'mx.testing.test', priority: 10 }] });
    sts = new MtaStsPolicies({
      resolver, port: policies.port, allowPrivateAddresses: true, ca: [...rootCertificates, testCa().cert.toString()],
      onEvent: (e) => events.push(e),
    });
  });
  afterEach(async () => {
    await Promise.all(sinks.splice(0).map((s) => s.close()));
  });

  const deliver = async (to: string, mxPort: number, pool?: SmtpConnectionPool): Promise<RecipientResult> => {
    const [r] = await deliverMessage({
      raw: Buffer.from(`From: a@sender.test\r\nTo: ${to}\r\nSubject: hi\r\n\r\nhello\r\n`), envelopeFrom: 'a@sender.test', recipients: [to],
      resolver, mxPort, allowPrivateAddresses: true, hostname: 'out.motor.test', timeouts, mtaSts: sts, pool,
    });
    return r;
  };
  const kinds = () => events.map((e) => e.kind);

  it('enforce: delivers over TLS to a listed MX whose certificate is valid for its name', async () => {
    const s = await sink(validFor('mx.enforce.test'));
    const r = await deliver('ann@enforce.test', s.port);
    expect(r).to.include({ outcome: 'delivered', smtpCode: '250', mx: 'mx.enforce.test' });
    expect(s.messages.map((m) => m.secure)).to.deep.equal([true]);
    expect(kinds()).to.deep.equal(['fetched']);
  });

  it('enforce: defers, sending nothing in plain text, when the certificate is self-signed or for another name', async () => {
    for (const opts of [{}, validFor('mx.elsewhere.test')]) {
      const s = await sink(opts);
      const r = await deliver('ann@enforce.test', s.port);
      expect(r).to.include({ outcome: 'deferred', smtpCode: null, mx: 'mx.enforce.test' });
      expect(r.detail).to.match(/^MTA-STS policy of enforce\.test \(enforce\): certificate of mx\.enforce\.test not valid: /);
      expect(s.messages).to.deep.equal([]);
      expect(s.connections, 'one connection: no plain-text retry').to.equal(1);
    }
    expect(events.filter((e) => e.kind === 'enforced_refusal')).to.have.length(2);
  });

  it('enforce: defers without connecting when the MX is not listed in the policy', async () => {
    dns.setRecords('enforce.test', { MX: [{ exchange: 'mx.elsewhere.test', priority: 10 }] });
    const s = await sink(validFor('mx.elsewhere.test'));
    const r = await deliver('ann@enforce.test', s.port);
    expect(r).to.include({ outcome: 'deferred', mx: 'mx.elsewhere.test', detail: 'MTA-STS policy of enforce.test (enforce): mx.elsewhere.test is not a listed MX' });
    expect(s.connections).to.equal(0);
    expect(events.at(-1)).to.deep.equal({ kind: 'enforced_refusal', domain: 'enforce.test', detail: r.detail });
  });

  it('enforce: skips an unlisted MX for a listed one', async () => {
    dns.setRecords('enforce.test', { MX: [{ exchange: 'mx.elsewhere.test', priority: 5 }, { exchange: 'mx.enforce.test', priority: 10 }] });
    const s = await sink(validFor('mx.enforce.test'));
    expect(await deliver('ann@enforce.test', s.port)).to.include({ outcome: 'delivered', mx: 'mx.enforce.test' });
    expect(s.connections).to.equal(1);
  });

  it('enforce: defers when the MX does not offer STARTTLS', async () => {
    const s = await sink({ starttls: false });
    const r = await deliver('ann@enforce.test', s.port);
    expect(r).to.include({ outcome: 'deferred', mx: 'mx.enforce.test' });
    expect(r.detail).to.match(/^MTA-STS policy of enforce\.test \(enforce\): mx\.enforce\.test does not offer STARTTLS/);
    expect(s.messages).to.deep.equal([]);
  });

  it('enforce: when every MX host is refused, each one\'s reason is recorded, not the last one\'s only', async () => {
    policies.setPolicy('mta-sts.enforce.test', policy('enforce', 'mx2.enforce.test', 'mx3.enforce.test'));
    dns.setRecords('enforce.test', { MX: [1, 2, 3].map((n) => ({ exchange: `mx${n}.enforce.test`, priority: n * 10 })) });
    dns.setRecords('mx1.enforce.test', { A: ['127.0.0.1'] });
    dns.setRecords('mx2.enforce.test', { A: ['127.0.0.1'] });
    // mx3 on another loopback address at mx2's port: the one MX port reaches both.
    dns.setRecords('mx3.enforce.test', { A: ['127.0.0.2'] });
    const noTls = await sink({ starttls: false });
    const otherName = await sink({ ...validFor('mx.elsewhere.test'), listen: { host: '127.0.0.2', port: noTls.port } });
    const r = await deliver('ann@enforce.test', noTls.port);
    expect(r).to.include({ outcome: 'deferred', smtpCode: null, smtpResponse: null, mx: 'mx3.enforce.test' });
    const reasons = r.detail!.replace(/^MTA-STS policy of enforce\.test \(enforce\): /, '').split('; ');
    expect(reasons).to.have.length(3);
    expect(reasons[0]).to.equal('mx1.enforce.test is not a listed MX');
    expect(reasons[1]).to.match(/^mx2\.enforce\.test does not offer STARTTLS/);
    expect(reasons[2]).to.match(/^certificate of mx3\.enforce\.test not valid: ERR_TLS_CERT_ALTNAME_INVALID/);
    expect([noTls.connections, otherName.connections]).to.deep.equal([1, 1]);
    expect(noTls.messages.concat(otherName.messages)).to.deep.equal([]);
    // One count for the attempt, naming the three.
    expect(events.filter((e) => e.kind === 'enforced_refusal')).to.deep.equal([{ kind: 'enforced_refusal', domain: 'enforce.test', detail: r.detail }]);
  });

  it('enforce: a listed host that could not be reached is named among the refused ones, with its own reason', async () => {
    // 127.0.0.3: loopback, nothing listening there.
    dns.setRecords('enforce.test', { MX: [{ exchange: 'mx.enforce.test', priority: 10 }, { exchange: 'mx.elsewhere.test', priority: 20 }] });
    dns.setRecords('mx.enforce.test', { A: ['127.0.0.3'] });
    try {
      const s = await sink();
      const r = await deliver('ann@enforce.test', s.port);
      expect(r).to.include({ outcome: 'deferred', smtpCode: null, mx: 'mx.elsewhere.test' });
      expect(r.detail).to.equal(`MTA-STS policy of enforce.test (enforce): mx.enforce.test: ESOCKET: connect ECONNREFUSED 127.0.0.3:${s.port}; mx.elsewhere.test is not a listed MX`);
      // The refusal event names the policy's refusals only.
      expect(events.filter((e) => e.kind === 'enforced_refusal').map((e) => (e as { detail: string }).detail)).to.deep.equal(['MTA-STS policy of enforce.test (enforce): mx.elsewhere.test is not a listed MX']);
    } finally {
      dns.setRecords('mx.enforce.test', { A: ['127.0.0.1'] });
    }
  });

  it('testing: reports every host tried that enforce would have refused, not only the one that took the message (one report per attempt)', async () => {
    // mx0 is not listed and cannot be reached (127.0.0.3, nothing listening); mx.testing.test takes the message.
    dns.setRecords('testing.test', { MX: [{ exchange: 'mx0.testing.test', priority: 5 }, { exchange: 'mx.testing.test', priority: 10 }] });
    dns.setRecords('mx0.testing.test', { A: ['127.0.0.3'] });
    const wouldFail = () => events.filter((e) => e.kind === 'testing_would_fail').map((e) => (e as { detail: string }).detail);

    const valid = await sink(validFor('mx.testing.test'));
    expect(await deliver('ann@testing.test', valid.port)).to.include({ outcome: 'delivered', mx: 'mx.testing.test' });
    expect(wouldFail()).to.deep.equal(['MTA-STS policy of testing.test (testing): mx0.testing.test is not a listed MX']);

    events = [];
    const selfSigned = await sink();
    expect(await deliver('bob@testing.test', selfSigned.port)).to.include({ outcome: 'delivered', mx: 'mx.testing.test' });
    expect(wouldFail()).to.have.length(1);
    expect(wouldFail()[0]).to.match(/^MTA-STS policy of testing\.test \(testing\): mx0\.testing\.test is not a listed MX; certificate of mx\.testing\.test not valid: /);

    // Delivered by none: still reported, the recipients deferred as without a policy (each host named).
    events = [];
    dns.setRecords('mx.testing.test', { A: ['127.0.0.3'] });
    try {
      const r = await deliver('cat@testing.test', valid.port);
      const refused = `ESOCKET: connect ECONNREFUSED 127.0.0.3:${valid.port}`;
      expect(r).to.include({ outcome: 'deferred', mx: 'mx.testing.test', detail: `No MX host of testing.test took the message: mx0.testing.test: ${refused}; mx.testing.test: ${refused}` });
      expect(wouldFail()).to.deep.equal(['MTA-STS policy of testing.test (testing): mx0.testing.test is not a listed MX']);
    } finally {
      dns.setRecords('mx.testing.test', { A: ['127.0.0.1'] });
    }
  });

  it('testing: delivers as without a policy, and reports what enforce would have refused', async () => {
    const s = await sink();
    const r = await deliver('ann@testing.test', s.port);
    expect(r).to.include({ outcome: 'delivered', mx: 'mx.testing.test' });
    expect(s.messages.map((m) => m.secure)).to.deep.equal([true]);
    const report = events.find((e) => e.kind === 'testing_would_fail') as { detail: string } | undefined;
    expect(report?.detail).to.match(/^MTA-STS policy of testing\.test \(testing\): certificate of mx\.testing\.test not valid: /);

    events = [];
    const valid = await sink(validFor('mx.testing.test'));
    expect(await deliver('bob@testing.test', valid.port)).to.include({ outcome: 'delivered' });
    expect(kinds()).to.deep.equal(['cached']);
  });

  it('mode none, and no TXT record: delivered as without MTA-STS (a self-signed MX still takes mail)', async () => {
    const s = await sink();
    expect(await deliver('ann@none.test', s.port)).to.include({ outcome: 'delivered' });
    expect(await deliver('ann@nosts.test', s.port)).to.include({ outcome: 'delivered' });
    expect(s.messages).to.have.length(2);
    expect(policies.requests.map((r) => r.host)).to.deep.equal(['mta-sts.none.test']);
  });

  it('keeps the policy between deliveries: the policy host is asked once', async () => {
    const s = await sink(validFor('mx.enforce.test'));
    for (const who of ['a', 'b', 'c']) expect(await deliver(`${who}@enforce.test`, s.port)).to.include({ outcome: 'delivered' });
    expect(policies.count('mta-sts.enforce.test')).to.equal(1);
  });

  it('keeps verified and unverified sessions apart in the connection cache', async () => {
    // nosts.test and enforce.test share mx.enforce.test; its certificate is self-signed.
    const pool = new SmtpConnectionPool({ maxMessages: 100, idleMs: 5000 });
    try {
      const s = await sink();
      expect(await deliver('ann@nosts.test', s.port, pool)).to.include({ outcome: 'delivered' });
      const r = await deliver('ann@enforce.test', s.port, pool);
      expect(r).to.include({ outcome: 'deferred' });
      expect(r.detail).to.match(/certificate of mx\.enforce\.test not valid/);
      expect(s.messages).to.have.length(1);
      expect(s.connections).to.equal(2);
    } finally {
      await pool.close();
    }
  });

  it('relay mode (SMTP_RELAY_URL) looks up no policy', async () => {
    const relay = await sink();
    const before = dns.queries.length;
    const [r] = await deliverMessage({
      raw: Buffer.from('From: a@sender.test\r\nSubject: hi\r\n\r\nhello\r\n'), envelopeFrom: 'a@sender.test', recipients: ['ann@enforce.test'],
      resolver, mxPort: 25, relayUrl: `smtp://relay.test:${relay.port}`, relayTls: { rejectUnauthorized: false }, hostname: 'out.motor.test', timeouts, mtaSts: sts,
    });
    expect(r).to.include({ outcome: 'delivered', mx: 'relay.test' });
    expect(dns.queries.slice(before).filter((q) => q.name.startsWith('_mta-sts.'))).to.deep.equal([]);
    expect(policies.requests).to.deep.equal([]);
  });

  it('a failed fetch with nothing cached: delivered as without a policy', async () => {
    policies.setPolicy('mta-sts.enforce.test', { status: 302, headers: { location: 'https://example.com/' } });
    const s = await sink();
    expect(await deliver('ann@enforce.test', s.port)).to.include({ outcome: 'delivered' });
    expect(events[0]).to.deep.include({ kind: 'fetch_failed', domain: 'enforce.test', kept: false });
  });
});
