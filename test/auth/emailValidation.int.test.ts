import { expect } from 'chai';
import { postJson } from '../support/motor';
import { startAuthHarness, type AuthHarness } from './harness';

describe('POST /api/email/validate and /batch (int)', function () {
  this.timeout(90_000);
  let h: AuthHarness;
  let token: string;
  before(async () => {
    h = await startAuthHarness({ ANONYMOUS_REQUEST_LIMIT: '1000' });
    h.dns.setRecords('mx.example.test', { MX: [{ exchange: 'in.mx.example.test', priority: 10 }] });
    h.dns.setRecords('a-only.example.test', { A: ['192.0.2.10'] });
    h.dns.setRecords('nullmx.example.test', { MX: [{ exchange: '', priority: 0 }], A: ['192.0.2.11'] });
    h.dns.setRecords('nothing.example.test', { TXT: ['v=spf1 -all'] });
    h.dns.setRecords('mailinator.com', { MX: [{ exchange: 'mx.mailinator.com', priority: 10 }] });
    h.dns.setRecords('gmial.com', { A: ['192.0.2.12'] });
    h.dns.setFailure('broken.example.test', 'servfail');
    token = (await h.signUp('validator@rcpt.test')).token;
  });
  after(async () => { await h?.close(); });

  const one = async (email: string) => {
    const r = await postJson(`${h.motor.baseUrl}/api/email/validate`, { email });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body.data;
  };

  it('answers valid, reason, normalized, per-check results and a suggestion', async () => {
    const ok = await one('Someone@MX.example.test');
    expect(ok).to.deep.include({ valid: true, reason: null, normalized: 'Someone@mx.example.test', suggestion: null });
    expect(ok.checks).to.deep.equal({
      syntax: { valid: true, reason: null }, domain: { status: 'ok', asciiDomain: 'mx.example.test' }, mx: { status: 'ok', hosts: ['in.mx.example.test'] }, disposable: false, role: false,
    });
    expect((await one('x@a-only.example.test')).checks.mx.status).to.equal('implicit');
    const nullMx = await one('x@nullmx.example.test');
    expect(nullMx).to.deep.include({ valid: false, reason: 'null_mx' });
    expect(await one('x@nothing.example.test')).to.deep.include({ valid: false, reason: 'no_mail_server' });
    expect(await one('x@nowhere.example.test')).to.deep.include({ valid: false, reason: 'domain_not_found' });
    const broken = await one('x@broken.example.test');
    expect(broken).to.deep.include({ valid: true, reason: null });
    expect(broken.checks.domain.status).to.equal('unknown');
    const flags = await one('info@mailinator.com');
    expect(flags.valid).to.equal(true);
    expect(flags.checks).to.deep.include({ disposable: true, role: true });
    expect((await one('jane@gmial.com')).suggestion).to.equal('jane@gmail.com');
    const bad = await one('not an address');
    expect(bad).to.deep.include({ valid: false, reason: 'no_at_sign', normalized: null });
    expect(bad.checks.domain.status).to.equal('skipped');
    const literal = await one('x@[192.0.2.1]');
    expect(literal).to.deep.include({ valid: true });
    expect(literal.checks.domain.status).to.equal('address_literal');
  });

  it('is limited per client IP without a credential, and validates its body', async () => {
    const r = await postJson(`${h.motor.baseUrl}/api/email/validate`, { email: 'x@mx.example.test' });
    expect(r.headers.get('x-ratelimit-limit')).to.equal('1000');
    for (const body of [{}, { email: 5 }, { email: 'x@y.z', more: 1 }, { email: 'a'.repeat(400) }]) {
      const b = await postJson(`${h.motor.baseUrl}/api/email/validate`, body);
      expect(b.status, JSON.stringify(body)).to.equal(400);
      expect(b.body.code).to.equal('validation_error');
    }
  });

  it('batch: dashboard JWT, one entry per address in order, at most 100', async () => {
    const auth = { authorization: `Bearer ${token}` };
    const emails = ['a@mx.example.test', 'bad', 'b@nullmx.example.test', 'c@mx.example.test'];
    const r = await postJson(`${h.motor.baseUrl}/api/email/validate/batch`, { emails }, auth);
    expect(r.status).to.equal(200);
    expect(r.body.data.count).to.equal(4);
    expect(r.body.data.results.map((x: { email: string; valid: boolean }) => [x.email, x.valid])).to.deep.equal([
      ['a@mx.example.test', true], ['bad', false], ['b@nullmx.example.test', false], ['c@mx.example.test', true],
    ]);
    expect((await postJson(`${h.motor.baseUrl}/api/email/validate/batch`, { emails })).status).to.equal(401);
    for (const body of [{ emails: [] }, { emails: Array.from({ length: 101 }, (_, i) => `u${i}@mx.example.test`) }, { emails: 'a@b.c' }]) {
      const b = await postJson(`${h.motor.baseUrl}/api/email/validate/batch`, body, auth);
      expect(b.status).to.equal(400);
      expect(b.body.code).to.equal('validation_error');
    }
  });
});
