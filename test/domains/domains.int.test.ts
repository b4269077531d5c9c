import { expect } from 'chai';
import { authenticate } from 'mailauth';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { refresherFor } from '../../commands/domains/health';
import { accountState } from '../../commands/domains/reads';
import { createResolver, mailauthResolver } from '../../workers/delivery/dns';
import { startAuthHarness, type AuthHarness } from '../auth/harness';
import { eventually, getJson, postJson, type TestMotor } from '../support/motor';
import { blockOn, dashboardApi, publicApi, publish, recordOf, type DnsRecordDto } from './support';

/**
 * Domains end to end over HTTP, with a DNS server on loopback serving the test zones (good and
 * broken) and an MX on loopback: add → verify → check-dns → sendReady → a delivered, DKIM-signed
 * send; every check reason; both route families; domain-health, config and account state.
 */
describe('domains (int)', function () {
  this.timeout(90_000);
  let h: AuthHarness;
  let motor: TestMotor;
  let owner: BootstrapResult;
  let other: BootstrapResult;
  let manage: ReturnType<typeof publicApi>;
  let read: ReturnType<typeof publicApi>;
  let n = 0;
  const fresh = () => `d${Date.now().toString(36)}${n++}.example.test`;

  before(async () => {
    h = await startAuthHarness({ SERVICE_DOMAIN: 'motor.test', DOMAIN_DNS_TIMEOUT_MS: '700', DOMAIN_HEALTH_STALE_SECONDS: '2', DOMAIN_HEALTH_LIVE_TIMEOUT_MS: '2000' });
    motor = h.motor;
    owner = await motor.bootstrap();
    other = await motor.bootstrap({ email: 'other@example.test' });
    manage = publicApi(motor, await motor.token(owner, ['config.manage'], 900));
    read = publicApi(motor, await motor.token(owner, ['config.read'], 900));
  });
  after(async () => {
    // Background domain-health re-checks finish before the database goes away.
    if (motor) await refresherFor(motor.rt.http).idle();
    await h?.close();
  });

  async function addPublished(api = manage, mode: 'txt' | 'cname_managed' = 'txt') {
    const name = fresh();
    const res = await api.post('/domains', { domain: name, dkimMode: mode });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return { name, id: res.body.data.id as string, body: res.body };
  }

  it('add → verify (ownership TXT) → check-dns → sendReady, then a send is delivered DKIM-signed', async () => {
    const name = fresh();
    const added = await manage.post('/domains', { domain: name.toUpperCase() });
    expect(added.status).to.equal(201);
    const d = added.body.data;
    expect(d).to.include({ domain: name, status: 'pending_verification', verified: false, sendReady: false, dkimMode: 'txt', sandbox: false, dkim_configured: false, spf_configured: false, dmarc_configured: false, lastCheckedAt: null });
    expect(d.dnsRecords.map((r: DnsRecordDto) => r.purpose)).to.deep.equal(['ownership', 'spf', 'dkim', 'dmarc']);
    expect(d.dnsRecords.every((r: DnsRecordDto) => r.status === 'pending')).to.equal(true);
    const own = recordOf(added.body, 'ownership');
    expect(own).to.include({ type: 'TXT', name: `_motor-verification.${name}` });
    expect(own.value).to.match(/^motor-verification=[0-9a-f]{32}$/);
    expect(recordOf(added.body, 'spf').value).to.equal('v=spf1 include:_spf.motor.test ~all');

    const listed = await read.get('/domains');
    expect(listed.status).to.equal(200);
    expect(listed.body.data.map((x: { id: string }) => x.id)).to.include(d.id);

    // Nothing published: verify answers 200 with the reason.
    const early = await manage.post(`/domains/${d.id}/verify`);
    expect(early.status).to.equal(200);
    expect(early.body.data).to.include({ verified: false, sendReady: false });
    expect(recordOf(early.body, 'ownership')).to.include({ status: 'missing', reason: 'ownership_missing' });

    // Ownership alone verifies the domain but sets no DNS flag.
    publish(h.dns, [own]);
    const verified = await manage.post(`/domains/${d.id}/verify`);
    expect(verified.body.data).to.include({ verified: true, status: 'verified', sendReady: false, spf_configured: false, dkim_configured: false });
    expect(verified.body.data.verifiedAt).to.be.a('string');
    expect(recordOf(verified.body, 'spf')).to.include({ status: 'missing', reason: 'spf_missing' });

    publish(h.dns, d.dnsRecords.filter((r: DnsRecordDto) => r.purpose !== 'ownership'));
    const checked = await manage.post(`/domains/${d.id}/check-dns`);
    expect(checked.status).to.equal(200);
    expect(checked.body.data).to.include({ sendReady: true, spf_configured: true, dkim_configured: true, dmarc_configured: true });
    expect(checked.body.data.dnsRecords.map((r: DnsRecordDto) => r.status)).to.deep.equal(['ok', 'ok', 'ok', 'ok']);
    expect(checked.body.data.lastCheckedAt).to.be.a('string');
    // Persisted: the list shows the same.
    const after = (await read.get('/domains')).body.data.find((x: { id: string }) => x.id === d.id);
    expect(after).to.include({ sendReady: true, spf_configured: true, dkim_configured: true });

    const block = await blockOn(motor, owner.accountId, d.id);
    const sent = await postJson(`${motor.baseUrl}/v1/send`, { from: `app@${name}`, to: 'user@rcpt.test', subject: 'Domain ready', text: 'Hello' }, { 'X-Api-Key': block.apiKey });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(200);
    const mail = await eventually(async () => h.mx.messages.find((m) => m.raw.toString().includes(sent.body.data.id)), 20_000);
    const auth = await authenticate(mail.raw, { resolver: mailauthResolver(createResolver([h.dns.address])), sender: `app@${name}`, ip: '127.0.0.1', helo: 'localhost', trustReceived: false });
    expect(auth.dkim.results[0].status.result).to.equal('pass');
    expect(auth.dkim.results[0].signingDomain).to.equal(name);
  });

  describe('broken zones give specific reasons', () => {
    let name: string;
    let id: string;
    let records: DnsRecordDto[];
    before(async () => {
      const a = await addPublished();
      ({ name, id } = a);
      records = a.body.data.dnsRecords;
    });
    const check = async () => {
      const res = await manage.post(`/domains/${id}/check-dns`);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return res.body;
    };
    const zone = (over: Partial<Record<string, string[]>>) => {
      for (const r of records) {
        const key = r.purpose;
        h.dns.setRecords(r.name, { TXT: over[key] ?? [r.value] });
      }
    };

    it('SPF without the service include: spf_include_missing with the record found', async () => {
      zone({ spf: ['v=spf1 include:_spf.google.com ~all'] });
      const body = await check();
      expect(recordOf(body, 'spf')).to.deep.include({ status: 'mismatch', reason: 'spf_include_missing', found: ['v=spf1 include:_spf.google.com ~all'] });
      expect(body.data.spf_configured).to.equal(false);
      expect(body.data.dkim_configured).to.equal(true);
    });
    it('two SPF records: spf_multiple_records', async () => {
      zone({ spf: [records[1].value, 'v=spf1 -all'] });
      expect(recordOf(await check(), 'spf')).to.include({ status: 'mismatch', reason: 'spf_multiple_records' });
    });
    it('a DKIM record with another key: dkim_key_mismatch', async () => {
      zone({ dkim: ['v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwrong'] });
      const body = await check();
      expect(recordOf(body, 'dkim')).to.include({ status: 'mismatch', reason: 'dkim_key_mismatch' });
      expect(recordOf(body, 'dkim').found![0]).to.include('wrong');
      expect(body.data).to.include({ dkim_configured: false, sendReady: false });
    });
    it('no DMARC record: dmarc_missing (not needed for sendReady)', async () => {
      zone({});
      h.dns.removeName(`_dmarc.${name}`);
      const body = await check();
      expect(recordOf(body, 'dmarc')).to.include({ status: 'missing', reason: 'dmarc_missing' });
      expect(body.data).to.include({ dmarc_configured: false, spf_configured: true, dkim_configured: true });
    });
    it('SERVFAIL: dns_servfail, and the previous flag is kept', async () => {
      zone({});
      expect((await check()).data.spf_configured).to.equal(true);
      h.dns.setFailure(name, 'servfail');
      try {
        const body = await check();
        expect(recordOf(body, 'spf')).to.include({ status: 'error', reason: 'dns_servfail' });
        expect(body.data.spf_configured).to.equal(true);
      } finally {
        h.dns.setFailure(name, null);
      }
    });
    it('a server that never answers: dns_timeout within the time cap', async () => {
      const dkimName = records.find((r) => r.purpose === 'dkim')!.name;
      h.dns.setFailure(dkimName, 'timeout');
      try {
        const t = Date.now();
        const body = await check();
        expect(Date.now() - t).to.be.below(3000);
        expect(recordOf(body, 'dkim')).to.include({ status: 'error', reason: 'dns_timeout' });
      } finally {
        h.dns.setFailure(dkimName, null);
      }
    });
  });

  it('409 domain_already_added on a duplicate add, also when two adds race', async () => {
    const { name, id } = await addPublished();
    const again = await manage.post('/domains', { domain: name });
    expect(again.status).to.equal(409);
    expect(again.body).to.include({ success: false, code: 'domain_already_added', domainId: id });
    expect(again.body.nextAction).to.be.a('string');
    // The bootstrap domain (made by the CLI) is on the account too.
    const cli = await manage.post('/domains', { domain: owner.dnsRecords.find((r) => r.purpose === 'spf')!.name });
    expect(cli.body.code).to.equal('domain_already_added');
    const racing = fresh();
    const results = await Promise.all([1, 2, 3].map(() => manage.post('/domains', { domain: racing })));
    expect(results.map((r) => r.status).sort()).to.deep.equal([201, 409, 409]);
    // Another account may add the same name.
    const otherManage = publicApi(motor, await motor.token(other, ['config.manage']));
    expect((await otherManage.post('/domains', { domain: racing })).status).to.equal(201);
  });

  it('concurrent check-dns and verify of one domain (public, dashboard, domain-health) all answer 200 with one answer, never 5xx (they were 500 internal_error)', async () => {
    const { id: domainId, body: addedBody } = await addPublished();
    const { motorBlockId } = await blockOn(motor, owner.accountId, domainId);
    const b = { domainId, motorBlockId, dnsRecords: addedBody.data.dnsRecords as DnsRecordDto[] };
    const api = manage;
    const health = publicApi(motor, await motor.token({ ...owner, motorBlockId }, ['config.read'], 900));
    const user = await h.signUp('dash-race@rcpt.test');
    const dash = dashboardApi(motor, user.token);
    const added = await dash.post('/domains', { domain: fresh() });
    const statuses = (rs: Array<{ status: number; body: { code?: string } }>) => rs.map((r) => `${r.status}${r.body.code ? `:${r.body.code}` : ''}`);
    const stream = async (id: string) => (await motor.rt.store.readStream(`sendingDomain-${id}`)).map((e) => e.type);

    // Nothing published yet: every check finds the same, so every caller gets 200 and that answer.
    for (const route of ['check-dns', 'verify']) {
      const rs = await Promise.all(Array.from({ length: 8 }, () => api.post(`/domains/${b.domainId}/${route}`)));
      expect(statuses(rs), route).to.deep.equal(Array(8).fill('200'));
      expect(new Set(rs.map((r) => JSON.stringify(r.body.data.dnsRecords))).size, route).to.equal(1);
    }
    const id = added.body.data.id;
    const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => dash.post(`/domains/${id}/${i % 2 ? 'verify' : 'check-dns'}`)));
    expect(statuses(rs)).to.deep.equal(Array(8).fill('200'));

    // Published: concurrent verifies all say verified; ownership is recorded once.
    publish(h.dns, b.dnsRecords);
    const verifies = await Promise.all([
      ...Array.from({ length: 6 }, () => api.post(`/domains/${b.domainId}/verify`)),
      ...Array.from({ length: 2 }, () => health.get(`/motor-blocks/${b.motorBlockId}/domain-health?refresh=true`)),
    ]);
    expect(statuses(verifies)).to.deep.equal(Array(8).fill('200'));
    for (const v of verifies.slice(0, 6)) expect(v.body.data).to.include({ verified: true, sendReady: true });
    expect((await stream(b.domainId)).filter((t) => t === 'DomainOwnershipVerified')).to.have.length(1);
    // Checks that found nothing new append nothing: the burst is answered by the checks it raced.
    const before = (await stream(b.domainId)).length;
    const again = await Promise.all(Array.from({ length: 8 }, () => api.post(`/domains/${b.domainId}/check-dns`)));
    expect(statuses(again)).to.deep.equal(Array(8).fill('200'));
    expect((await stream(b.domainId)).length - before).to.be.within(1, 8);
    // Every caller reads what it was answered (read-your-writes holds for the answered-by-another checks too).
    expect((await api.get('/domains')).body.data.find((d: { id: string }) => d.id === b.domainId).lastCheckedAt)
      .to.be.oneOf(again.map((r) => r.body.data.lastCheckedAt));
  });

  it('bad input: 400 invalid_domain / domain_reserved; 422 for a body of the wrong shape', async () => {
    expect((await manage.post('/domains', { domain: 'not a domain' })).body).to.include({ code: 'invalid_domain', error: 'Invalid domain' });
    // A well-formed name the operator keeps: its text says so, not that the name is malformed.
    expect((await manage.post('/domains', { domain: 'x.sandbox.motor.test' })).body).to.include({ code: 'domain_reserved', error: 'Domain reserved' });
    const wrongMode = await manage.post('/domains', { domain: fresh(), dkimMode: 'nope' });
    expect(wrongMode.status).to.equal(422);
    expect(wrongMode.body.code).to.equal('validation_error');
    expect((await manage.post('/domains', {})).status).to.equal(422);
    expect((await manage.post('/domains/not-a-uuid/verify')).body).to.include({ code: 'invalid_id' });
  });

  it("404 for another account's domain id; 404 for an unknown id", async () => {
    const { id } = await addPublished();
    const otherManage = publicApi(motor, await motor.token(other, ['config.manage']));
    for (const path of [`/domains/${id}/verify`, `/domains/${id}/check-dns`, `/domains/${id}/rotate-dkim`]) {
      const res = await otherManage.post(path);
      expect(res.status, path).to.equal(404);
      expect(res.body.code).to.equal('domain_not_found');
    }
    expect((await otherManage.get('/domains')).body.data.map((d: { id: string }) => d.id)).to.not.include(id);
    expect((await manage.post('/domains/0b7d0f38-5d0e-4c8a-9d7e-3f1b2a4c5d6e/verify')).status).to.equal(404);
  });

  it('a domain id in capitals is the same domain on both route families (it was 404 domain_not_found); another account\'s is still 404', async () => {
    const { id, body } = await addPublished();
    const upper = id.toUpperCase();
    publish(h.dns, body.data.dnsRecords);
    const verified = await manage.post(`/domains/${upper}/verify`);
    expect([verified.status, verified.body.code ?? null], JSON.stringify(verified.body)).to.deep.equal([200, null]);
    expect(verified.body.data).to.include({ id, verified: true, sendReady: true });
    const checked = await manage.post(`/domains/${upper}/check-dns`);
    expect([checked.status, checked.body.code ?? null], JSON.stringify(checked.body)).to.deep.equal([200, null]);
    expect(checked.body.data).to.include({ id, spf_configured: true, dkim_configured: true });
    // A txt domain has no managed key to rotate: the domain's own answer, not not-found.
    expect((await manage.post(`/domains/${upper}/rotate-dkim`)).body.code).to.equal('dkim_rotation_not_available');

    const user = await h.signUp('dash-caps@rcpt.test');
    const dash = dashboardApi(motor, user.token);
    const added = await dash.post('/domains', { domain: fresh() });
    expect(added.status).to.equal(201);
    publish(h.dns, added.body.data.dnsRecords);
    const dashVerified = await dash.post(`/domains/${(added.body.data.id as string).toUpperCase()}/verify`);
    expect([dashVerified.status, dashVerified.body.code ?? null], JSON.stringify(dashVerified.body)).to.deep.equal([200, null]);
    expect(dashVerified.body.data).to.include({ id: added.body.data.id, verified: true });
    expect((await dash.post(`/domains/${upper}/check-dns`)).body.code).to.equal('domain_not_found');
  });

  it('credentials and scopes: config.read cannot add; block API keys, dashboard JWTs and no token are refused', async () => {
    const denied = await read.post('/domains', { domain: fresh() });
    expect(denied.status).to.equal(403);
    expect(denied.body.code).to.equal('insufficient_scope');
    expect((await read.post(`/domains/${owner.domainId}/check-dns`)).status).to.equal(403);
    const logsOnly = publicApi(motor, await motor.token(owner, ['logs.read']));
    expect((await logsOnly.get('/domains')).status).to.equal(403);
    expect((await getJson(`${motor.baseUrl}/api/public/v1/domains`, { 'X-Api-Key': owner.apiKey })).status).to.equal(401);
    expect((await getJson(`${motor.baseUrl}/api/public/v1/domains`, { authorization: `ApiKey ${owner.apiKey}` })).status).to.equal(401);
    expect((await getJson(`${motor.baseUrl}/api/public/v1/domains`)).status).to.equal(401);
    const user = await h.signUp('dash-cred@rcpt.test');
    expect((await getJson(`${motor.baseUrl}/api/public/v1/domains`, { authorization: `Bearer ${user.token}` })).status).to.equal(401);
    // And the other way round: a public bearer token is not a dashboard session.
    const token = await motor.token(owner, ['config.manage']);
    expect((await getJson(`${motor.baseUrl}/api/domains`, { authorization: `Bearer ${token}` })).status).to.equal(401);
  });

  it('the dashboard routes: same bodies and answers, on the signed-in account', async () => {
    const user = await h.signUp('dash-domains@rcpt.test');
    const dash = dashboardApi(motor, user.token);
    expect((await dash.get('/domains')).body).to.deep.equal({ success: true, data: [] });
    const name = fresh();
    const added = await dash.post('/domains', { domain: name });
    expect(added.status).to.equal(201);
    expect(Object.keys(added.body.data).sort()).to.deep.equal(Object.keys((await addPublished()).body.data).sort());
    const id = added.body.data.id;
    expect((await dash.post('/domains', { domain: name })).body.code).to.equal('domain_already_added');
    expect((await dash.post('/domains', { domain: 'bad domain' })).status).to.equal(400);
    expect((await dash.post('/domains', { dkimMode: 'txt' })).status).to.equal(400);
    publish(h.dns, added.body.data.dnsRecords);
    const verified = await dash.post(`/domains/${id}/verify`);
    expect(verified.status).to.equal(200);
    expect(verified.body.data).to.include({ verified: true, sendReady: true });
    const checked = await dash.post(`/domains/${id}/check-dns`);
    expect(checked.body.data).to.include({ sendReady: true, spf_configured: true, dkim_configured: true });
    expect((await dash.get('/domains')).body.data.map((d: { id: string }) => d.id)).to.deep.equal([id]);
    // Not another account's domains.
    expect((await dash.post(`/domains/${owner.domainId}/check-dns`)).status).to.equal(404);
    // The public family of that account does not see it either (owner is another account).
    expect((await read.get('/domains')).body.data.map((d: { id: string }) => d.id)).to.not.include(id);

    // Account state of an account without any Motor Block (read directly: a public token needs a block to be bound to).
    const state = await accountState(motor.rt.db, motor.rt.store, motor.config, user.accountId);
    expect(state.motorBlocks).to.deep.include({ exists: false, total: 0, production: 0 });
    expect(state.domains).to.include({ total: 1, verified: 1, sendReady: 1 });
    expect(state.sandbox.provisioned).to.equal(false);
    expect(state.nextStep).to.equal('create_motor_block');
  });

  describe('domain-health (cache-first)', () => {
    it('cached while fresh; stale → an asynchronous refresh the next call sees; refresh=true answers live', async () => {
      // A domain never checked: stale at once, its refresh is scheduled by this call.
      const b = await motor.bootstrap({ trustDns: false });
      publish(h.dns, b.dnsRecords);
      const api = publicApi(motor, await motor.token(b, ['config.read'], 900));
      const first = await api.get(`/motor-blocks/${b.motorBlockId}/domain-health`);
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      expect(first.body.data).to.include({ motorBlockId: b.motorBlockId, source: 'stale', refreshScheduled: true, checkedAt: null, staleAfterSeconds: 2, sendReady: false });
      expect(first.body.data.domain.id).to.equal(b.domainId);
      const seen = await eventually(async () => {
        const r = await api.get(`/motor-blocks/${b.motorBlockId}/domain-health`);
        return r.body.data.checkedAt ? r.body.data : null;
      });
      expect(seen.source).to.equal('cached');
      expect(seen.domain).to.include({ spf_configured: true, dkim_configured: true });
      expect(seen.sendReady).to.equal(false); // ownership is verify's business, not a DNS check's

      // A running refresh is not started twice.
      await new Promise((r) => setTimeout(r, 2100));
      const dkimName = b.dnsRecords.find((r) => r.purpose === 'dkim')!.name;
      h.dns.setFailure(dkimName, 'timeout');
      try {
        const stale = await api.get(`/motor-blocks/${b.motorBlockId}/domain-health`);
        expect(stale.body.data).to.include({ source: 'stale', refreshScheduled: true, checkedAt: seen.checkedAt });
        const again = await api.get(`/motor-blocks/${b.motorBlockId}/domain-health`);
        expect(again.body.data).to.include({ source: 'refreshing', refreshScheduled: false });
      } finally {
        await refresherFor(motor.rt.http).idle();
        h.dns.setFailure(dkimName, null);
      }

      const live = await api.get(`/motor-blocks/${b.motorBlockId}/domain-health?refresh=true`);
      expect(live.body.data.source).to.equal('live');
      expect(new Date(live.body.data.checkedAt).getTime()).to.be.greaterThan(new Date(seen.checkedAt).getTime());
      expect(live.body.data.domain.dnsRecords.find((r: DnsRecordDto) => r.purpose === 'spf').status).to.equal('ok');
      const cached = await api.get(`/motor-blocks/${b.motorBlockId}/domain-health`);
      expect(cached.body.data).to.include({ source: 'cached', checkedAt: live.body.data.checkedAt });
    });

    it('public bearer with config.read only, bound to that block', async () => {
      const path = `/motor-blocks/${owner.motorBlockId}/domain-health`;
      const user = await h.signUp('dash-health@rcpt.test');
      expect((await getJson(`${motor.baseUrl}/api/public/v1${path}`, { authorization: `Bearer ${user.token}` })).status).to.equal(401);
      expect((await getJson(`${motor.baseUrl}/api/public/v1${path}`, { 'X-Api-Key': owner.apiKey })).status).to.equal(401);
      expect((await publicApi(motor, await motor.token(owner, ['logs.read'])).get(path)).status).to.equal(403);
      expect((await publicApi(motor, await motor.token(other, ['config.read'])).get(path)).status).to.equal(403);
      expect((await read.get(path)).status).to.equal(200);
    });
  });

  it('GET /motor-blocks/{id}/config: a non-sensitive snapshot with the domain status', async () => {
    const res = await read.get(`/motor-blocks/${owner.motorBlockId}/config`);
    expect(res.status).to.equal(200);
    const c = res.body.data;
    expect(c).to.include({ id: owner.motorBlockId, type: 'general_purpose', status: 'active', activeAuthMethod: 'smtp_password', smtp_username: owner.smtpUsername, credentialsAvailable: false });
    expect(c.limits).to.include({ source: 'plan', burst: motor.config.defaultPlan.burst });
    expect(c.domain).to.include({ id: owner.domainId, verified: true, sendReady: true, spf_configured: true, dkim_configured: true });
    expect(c.dashboardUrl).to.equal(`${motor.config.authPublicUrl}/dashboard/motor-blocks/${owner.motorBlockId}`);
    const text = JSON.stringify(res.body);
    for (const secret of [owner.smtpPassword, owner.apiKey, owner.accountApiKey]) expect(text).to.not.include(secret);
    expect(text).to.not.match(/hash"|secret|"password"|private/i);
    expect((await publicApi(motor, await motor.token(other, ['config.read'])).get(`/motor-blocks/${owner.motorBlockId}/config`)).status).to.equal(403);
    expect((await publicApi(motor, await motor.token(owner, ['logs.read'])).get(`/motor-blocks/${owner.motorBlockId}/config`)).status).to.equal(403);
  });

  it('GET /account/state of a dashboard account before any production block (token for its sandbox block); the sandbox domain', async () => {
    const user = await h.signUp('dash-state@rcpt.test');
    const provisioned = await postJson(`${motor.baseUrl}/api/developer/sandbox/provision`, {}, { authorization: `Bearer ${user.token}` });
    expect(provisioned.status, JSON.stringify(provisioned.body)).to.equal(201);
    const sandboxBlockId = provisioned.body.data.motorBlockId as string;
    const minted = await postJson(`${motor.baseUrl}/api/public/token`, { motorBlockId: sandboxBlockId, scopes: ['config.read'] }, { authorization: `Bearer ${user.token}` });
    expect(minted.status, JSON.stringify(minted.body)).to.equal(200);
    const api = publicApi(motor, minted.body.data.token);
    const state = await api.get('/account/state');
    expect(state.status).to.equal(200);
    expect(state.body.data).to.include({ accountId: user.accountId, nextStep: 'add_domain' });
    expect(state.body.data.motorBlocks).to.include({ production: 0 });
    expect(state.body.data.sandbox).to.include({ provisioned: true, motorBlockId: sandboxBlockId, converted: false });
    expect(state.body.data.domains.items).to.have.length(1);
    expect(state.body.data.domains.items[0]).to.include({ sandbox: true, verified: true, sendReady: true });
    // The sandbox domain: nothing to publish, never stale.
    const [domain] = (await api.get('/domains')).body.data;
    expect(domain).to.include({ sandbox: true, sendReady: true });
    expect(domain.domain.endsWith('.sandbox.motor.test')).to.equal(true);
    expect(domain.dnsRecords).to.deep.equal([]);
    const health = await api.get(`/motor-blocks/${sandboxBlockId}/domain-health`);
    expect(health.body.data).to.include({ source: 'cached', refreshScheduled: false, sendReady: true });
  });

  it('GET /account/state: domains, blocks, sandbox and the next step', async () => {
    const b = await motor.bootstrap({ trustDns: false });
    const api = publicApi(motor, await motor.token(b, ['config.read']));
    const s1 = (await api.get('/account/state')).body.data;
    expect(s1).to.include({ accountId: b.accountId, nextStep: 'verify_domain' });
    expect(s1.domains).to.include({ total: 1, verified: 0, sendReady: 0 });
    expect(s1.motorBlocks).to.deep.include({ exists: true, total: 1, active: 1, production: 1 });
    expect(s1.sandbox).to.deep.equal({ provisioned: false, handle: null, domainId: null, motorBlockId: null, motorBlockStatus: null, converted: false, convertedAt: null });
    expect(s1.nextAction).to.include('verify');
    publish(h.dns, b.dnsRecords);
    const m = publicApi(motor, await motor.token(b, ['config.manage']));
    await m.post(`/domains/${b.domainId}/verify`);
    const s2 = (await api.get('/account/state')).body.data;
    expect(s2.nextStep).to.equal('send');
    expect(s2.domains).to.include({ verified: 1, sendReady: 1 });
    expect((await publicApi(motor, await motor.token(b, ['logs.read'])).get('/account/state')).status).to.equal(403);
  });
});
