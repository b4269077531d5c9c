import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startPolicyServer, type PolicyServer } from '../support/mtaStsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { issuedCertificate, testCa } from '../support/testCa';
import { eventually, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';

/**
 * MTA-STS through the whole product (docs/DELIVERY.md "MTA-STS"): MTA_STS on by default,
 * MTA_STS_PORT and DELIVERY_TLS_CA_FILE from the environment, the policy host and MX on loopback.
 */
describe('MTA-STS: send → policy → deliver or defer (e2e)', function () {
  this.timeout(60_000);
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let policyHost: PolicyServer;
  let motor: TestMotor;
  let block: BootstrapResult;
  let senderDomain: string;

  before(async () => {
    policyHost = await startPolicyServer(issuedCertificate(['mta-sts.sts.test', 'mta-sts.strict.test', 'mta-sts.multi.test']));
    policyHost.setPolicy('mta-sts.sts.test', 'version: STSv1\nmode: enforce\nmx: mx.sts.test\nmax_age: 86400\n');
    policyHost.setPolicy('mta-sts.strict.test', 'version: STSv1\nmode: enforce\nmx: *.strict.test\nmax_age: 86400\n');
    policyHost.setPolicy('mta-sts.multi.test', 'version: STSv1\nmode: enforce\nmx: mx2.multi.test\nmx: mx3.multi.test\nmax_age: 86400\n');
    dns = await startDnsServer({
      // strict.test's MX is not one its policy lists.
      'sts.test': { MX: [{ exchange: 'mx.sts.test', priority: 10 }] },
      'strict.test': { MX: [{ exchange: 'mx.sts.test', priority: 10 }] },
      // plain.test publishes no policy, like most domains.
      'plain.test': { MX: [{ exchange: 'mx.sts.test', priority: 10 }] },
      // multi.test: mx1 is not listed, mx2 is the MX whose certificate is mx.sts.test's, nothing listens at mx3.
      'multi.test': { MX: [1, 2, 3].map((n) => ({ exchange: `mx${n}.multi.test`, priority: n * 10 })) },
      'mx1.multi.test': { A: ['127.0.0.1'] },
      'mx2.multi.test': { A: ['127.0.0.1'] },
      'mx3.multi.test': { A: ['127.0.0.3'] },
      '_mta-sts.multi.test': { TXT: ['v=STSv1; id=1;'] },
      'mta-sts.multi.test': { A: ['127.0.0.1'] },
      'mx.sts.test': { A: ['127.0.0.1'] },
      '_mta-sts.sts.test': { TXT: ['v=STSv1; id=1;'] },
      '_mta-sts.strict.test': { TXT: ['v=STSv1; id=1;'] },
      'mta-sts.sts.test': { A: ['127.0.0.1'] },
      'mta-sts.strict.test': { A: ['127.0.0.1'] },
    });
    mx = await startSmtpSink({ tls: issuedCertificate(['mx.sts.test']) });
    motor = await startTestMotor({
      env: { DNS_SERVERS: dns.address, MX_PORT: String(mx.port), MTA_STS_PORT: String(policyHost.port), DELIVERY_TLS_CA_FILE: testCa().certPath, DELIVERY_RETRY_SCHEDULE: '60' },
    });
    block = await motor.bootstrap({ trustDns: true });
    senderDomain = block.dnsRecords.find((r) => r.purpose === 'spf')!.name;
    for (const r of block.dnsRecords) dns.addRecords(r.name, { TXT: [r.value] });
  });
  after(async () => {
    await motor?.close();
    await mx?.close();
    await policyHost?.close();
    await dns?.close();
  });

  const send = (to: string) => postJson(`${motor.baseUrl}/v1/send`, { from: `app@${senderDomain}`, to, subject: 'Hello', text: 'Hi there' }, { 'X-Api-Key': block.apiKey });
  async function outcome(id: string, wanted: string) {
    const token = await motor.token(block, ['logs.read']);
    return eventually(async () => {
      const r = await getJson(`${motor.baseUrl}/api/public/v1/messages/${id}`, { authorization: `Bearer ${token}` });
      return r.status === 200 && r.body.data.currentOutcome === wanted ? r.body.data : null;
    }, 20_000);
  }

  it('delivers over verified TLS to the MX an enforce policy lists', async () => {
    const res = await send('ann@sts.test');
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(await outcome(res.body.data.id, 'delivered')).to.include({ smtpCode: '250' });
    const received = mx.messages.find((m) => m.raw.toString().includes(res.body.data.id));
    expect(received?.secure).to.equal(true);
    expect(policyHost.count('mta-sts.sts.test')).to.equal(1);
  });

  it('defers a recipient whose domain\'s enforce policy does not list its MX, with the reason', async () => {
    const res = await send('bob@strict.test');
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const deferred = await outcome(res.body.data.id, 'deferred');
    expect(deferred).to.include({ smtpCode: null, smtpResponse: 'MTA-STS policy of strict.test (enforce): mx.sts.test is not a listed MX' });
    expect(mx.messages.some((m) => m.raw.toString().includes(res.body.data.id))).to.equal(false);
  });

  it('defers with every MX host\'s reason when an enforce policy leaves none usable', async () => {
    const res = await send('eve@multi.test');
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const deferred = await outcome(res.body.data.id, 'deferred');
    expect(deferred.smtpCode).to.equal(null);
    const reasons = String(deferred.smtpResponse).replace(/^MTA-STS policy of multi\.test \(enforce\): /, '').split('; ');
    expect(reasons[0]).to.equal('mx1.multi.test is not a listed MX');
    expect(reasons[1]).to.match(/^certificate of mx2\.multi\.test not valid: ERR_TLS_CERT_ALTNAME_INVALID/);
    expect(reasons[2]).to.equal(`mx3.multi.test: ESOCKET: connect ECONNREFUSED 127.0.0.3:${mx.port}`);
    expect(reasons).to.have.length(3);
  });

  it('asks TXT _mta-sts of a domain without a policy once for two deliveries within a minute (the worker\'s DNS cache)', async () => {
    for (const to of ['carl@plain.test', 'dora@plain.test']) {
      const res = await send(to);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      await outcome(res.body.data.id, 'delivered');
    }
    expect(dns.queries.filter((q) => q.name === '_mta-sts.plain.test' && q.type === 'TXT')).to.have.length(1);
    expect(policyHost.count('mta-sts.plain.test')).to.equal(0);
  });
});
