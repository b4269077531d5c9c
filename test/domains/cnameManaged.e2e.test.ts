import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { authenticate } from 'mailauth';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { managedDkimRecords } from '../../projections/directory/queries';
import { createResolver, mailauthResolver } from '../../workers/delivery/dns';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { eventually, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { blockOn, publicApi, publish, recordOf, type DnsRecordDto } from './support';

/**
 * Service-managed DKIM (`cname_managed`): the owner publishes one CNAME, the service serves the
 * key behind it (here the loopback DNS plays the operator's zone, filled from managedDkimRecords),
 * and a rotation changes the signing key without the owner touching DNS.
 */
const execFileP = promisify(execFile);

describe('cname_managed DKIM and key rotation (e2e)', function () {
  this.timeout(90_000);
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let owner: BootstrapResult;
  let api: ReturnType<typeof publicApi>;
  const name = `managed${Date.now().toString(36)}.example.test`;

  before(async () => {
    dns = await startDnsServer({ 'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] }, 'mx.rcpt.test': { A: ['127.0.0.1'] } });
    mx = await startSmtpSink();
    motor = await startTestMotor({ env: { DNS_SERVERS: dns.address, MX_PORT: String(mx.port), SERVICE_DOMAIN: 'motor.test', DOMAIN_DNS_TIMEOUT_MS: '700', DELIVERY_RETRY_SCHEDULE: '1,1,1' } });
    owner = await motor.bootstrap();
    api = publicApi(motor, await motor.token(owner, ['config.manage'], 900));
  });
  after(async () => {
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  /** The operator's DNS: serve every managed key at its service-side name. */
  const serveServiceZone = async () => {
    for (const r of await managedDkimRecords(motor.rt.db, motor.config.serviceDomain)) dns.setRecords(r.name, { TXT: [r.value] });
  };
  const verifyDkim = async (raw: Buffer) => {
    const auth = await authenticate(raw, { resolver: mailauthResolver(createResolver([dns.address])), sender: `app@${name}`, ip: '127.0.0.1', helo: 'localhost', trustReceived: false });
    return auth.dkim.results[0];
  };
  const sendAndReceive = async (apiKey: string, subject: string) => {
    const sent = await postJson(`${motor.baseUrl}/v1/send`, { from: `app@${name}`, to: 'user@rcpt.test', subject, text: 'Hi' }, { 'X-Api-Key': apiKey });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(200);
    return eventually(async () => mx.messages.find((m) => m.raw.toString().includes(sent.body.data.id)), 20_000);
  };

  it('one CNAME to publish; wrong target and a pasted key give their reasons; rotation switches the signing key', async () => {
    const added = await api.post('/domains', { domain: name, dkimMode: 'cname_managed' });
    expect(added.status).to.equal(201);
    const id = added.body.data.id as string;
    expect(added.body.data.dkimMode).to.equal('cname_managed');
    const cname = recordOf(added.body, 'dkim');
    expect(cname).to.include({ type: 'CNAME', name: `motor._domainkey.${name}`, value: `motor.${id}.dkim.motor.test` });
    expect(added.body.data.dnsRecords.filter((r: DnsRecordDto) => r.type === 'TXT' && r.purpose === 'dkim')).to.have.length(0);

    publish(dns, added.body.data.dnsRecords.filter((r: DnsRecordDto) => r.purpose !== 'dkim'));
    await serveServiceZone();

    // A TXT key pasted where the CNAME belongs.
    dns.setRecords(cname.name, { TXT: ['v=DKIM1; k=rsa; p=PASTED'] });
    let res = await api.post(`/domains/${id}/verify`);
    expect(res.body.data).to.include({ verified: true, sendReady: false, dkim_configured: false, spf_configured: true });
    expect(recordOf(res.body, 'dkim')).to.deep.include({ status: 'missing', reason: 'dkim_cname_missing', found: ['v=DKIM1; k=rsa; p=PASTED'] });

    // A CNAME to somewhere else.
    dns.setRecords('elsewhere.example.net', { TXT: ['v=DKIM1; p=OTHER'] });
    dns.setRecords(cname.name, { CNAME: 'elsewhere.example.net' });
    res = await api.post(`/domains/${id}/check-dns`);
    expect(recordOf(res.body, 'dkim')).to.deep.include({ status: 'mismatch', reason: 'dkim_cname_wrong_target', found: ['elsewhere.example.net'] });

    // The right CNAME: ready.
    publish(dns, [cname]);
    res = await api.post(`/domains/${id}/check-dns`);
    expect(recordOf(res.body, 'dkim').status).to.equal('ok');
    expect(res.body.data).to.include({ sendReady: true, dkim_configured: true });

    const block = await blockOn(motor, owner.accountId, id);
    const before = await sendAndReceive(block.apiKey, 'before rotation');
    const sigBefore = await verifyDkim(before.raw);
    expect(sigBefore.status.result).to.equal('pass');
    expect(sigBefore.signingDomain).to.equal(name);
    const oldKey = (await managedDkimRecords(motor.rt.db, motor.config.serviceDomain)).find((r) => r.domainId === id)!.value;

    const rotated = await api.post(`/domains/${id}/rotate-dkim`);
    expect(rotated.status, JSON.stringify(rotated.body)).to.equal(200);
    expect(rotated.body.data).to.include({ sendReady: true, dkim_configured: true });
    expect(recordOf(rotated.body, 'dkim')).to.include({ name: cname.name, value: cname.value });
    const newKey = (await managedDkimRecords(motor.rt.db, motor.config.serviceDomain)).find((r) => r.domainId === id)!.value;
    expect(newKey).to.not.equal(oldKey);

    // Until the service zone serves the new key, the check says so (the owner's CNAME is fine).
    res = await api.post(`/domains/${id}/check-dns`);
    expect(recordOf(res.body, 'dkim')).to.include({ status: 'mismatch', reason: 'dkim_key_not_published' });
    await serveServiceZone();
    res = await api.post(`/domains/${id}/check-dns`);
    expect(recordOf(res.body, 'dkim').status).to.equal('ok');

    const after = await sendAndReceive(block.apiKey, 'after rotation');
    expect((await verifyDkim(after.raw)).status.result).to.equal('pass');
    // Signed with the new key: against the old key it fails.
    dns.setRecords(`motor.${id}.dkim.motor.test`, { TXT: [oldKey] });
    expect((await verifyDkim(after.raw)).status.result).to.not.equal('pass');
    dns.setRecords(`motor.${id}.dkim.motor.test`, { TXT: [newKey] });
  });

  it('a TXT-mode domain cannot be rotated by the service (409 dkim_rotation_not_available)', async () => {
    const res = await api.post(`/domains/${owner.domainId}/rotate-dkim`);
    expect(res.status).to.equal(409);
    expect(res.body.code).to.equal('dkim_rotation_not_available');
  });

  it('npm run cli -- dns managed-dkim prints what the service zone must serve: the current key of every managed domain', async () => {
    const { stdout } = await execFileP('npx', ['tsx', 'scripts/cli.ts', 'dns', 'managed-dkim', '--json'], {
      env: { ...process.env, DATABASE_URL: motor.rt.databaseUrl, SERVICE_DOMAIN: 'motor.test', TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', LOG_LEVEL: 'silent' },
    });
    const out = JSON.parse(stdout) as { records: Array<{ type: string; name: string; value: string }>; zone: string[] };
    const expected = await managedDkimRecords(motor.rt.db, motor.config.serviceDomain);
    expect(expected.length).to.be.greaterThan(0);
    expect(out.records).to.deep.equal(expected.map((r) => ({ type: 'TXT', name: r.name, value: r.value })));
    expect(out.records.every((r) => r.name.endsWith('.dkim.motor.test'))).to.equal(true);
    expect(out.zone).to.have.length(expected.length);
    expect(out.zone[0]).to.match(/^motor\.[0-9a-f-]{36}\.dkim\.motor\.test\. 300 IN TXT "v=DKIM1;/);
  });
});
