import { expect } from 'chai';
import { zoneLines } from '../../commands/domains/serviceZone';
import type { DomainRecordCheck } from '../../domain/events';
import { isDomainError } from '../../domain/errors';
import { evaluateRecords, expectedRecords, lookupKey, lookupsFor, type Lookup } from '../../domain/sendingDomain/records';
import {
  addDomain, domainIdFor, fold, flagsFrom, isSendReady, ownedDomain, parseDomainName, recordDnsCheck, rotateDkimKey, verifyDomain,
  type SendingDomain, type SendingDomainEvent,
} from '../../domain/sendingDomain/sendingDomain';

const now = new Date('2026-11-22T06:00:00Z');
const accountId = '11111111-1111-4111-8111-111111111111';
const svc = 'motor.test';
const dkim = { selector: 'motor20261122', algorithm: 'rsa-sha256' as const, publicKey: 'PUBKEY', keyId: '22222222-2222-4222-8222-222222222222' };
const domainId = domainIdFor(accountId, 'example.com');
const added: SendingDomainEvent = {
  type: 'DomainAdded',
  data: { domainId, accountId, name: 'example.com', dkimSelector: dkim.selector, dkimAlgorithm: dkim.algorithm, dkimPublicKey: dkim.publicKey, dkimKeyId: dkim.keyId, ownershipToken: 'tok', dkimMode: 'txt', sandbox: false, addedAt: now.toISOString() },
};
const given = (...events: SendingDomainEvent[]) => fold(events) as SendingDomain;
const rec = (purpose: DomainRecordCheck['purpose'], status: DomainRecordCheck['status'], reason?: string): DomainRecordCheck =>
  ({ type: 'TXT', name: 'n', value: 'v', purpose, status, ...(reason ? { reason } : {}) });
const codeOf = (fn: () => unknown): string => {
  try { fn(); } catch (e) { if (isDomainError(e)) return e.code; throw e; }
  return 'no error';
};

describe('sending domain decider (unit)', () => {
  it('add: no domain yet → DomainAdded with token, mode and key', () => {
    const events = addDomain(fold([]), { domainId, accountId, name: 'example.com', dkimMode: 'cname_managed', ownershipToken: 'tok', dkim, now });
    expect(events).to.have.length(1);
    expect(events[0].type).to.equal('DomainAdded');
    expect(events[0].data).to.include({ ownershipToken: 'tok', dkimMode: 'cname_managed', sandbox: false, dkimKeyId: dkim.keyId });
  });
  it('add: the name is already on the account → 409 domain_already_added', () => {
    expect(codeOf(() => addDomain(given(added), { domainId, accountId, name: 'example.com', dkimMode: 'txt', ownershipToken: 'x', dkim, now }))).to.equal('domain_already_added');
  });
  it('the domain id is derived from account and name (the stream is the uniqueness claim)', () => {
    expect(domainIdFor(accountId, 'Example.com')).to.equal(domainId);
    expect(domainIdFor('33333333-3333-4333-8333-333333333333', 'example.com')).to.not.equal(domainId);
  });
  it('another account asking for the domain → 404 domain_not_found', () => {
    expect(codeOf(() => ownedDomain(given(added), '33333333-3333-4333-8333-333333333333'))).to.equal('domain_not_found');
    expect(codeOf(() => ownedDomain(fold([]), accountId))).to.equal('domain_not_found');
  });
  it('verify: token found → DomainOwnershipVerified + DomainDnsChecked; ownership alone sets no DNS flag', () => {
    const records = [rec('ownership', 'ok'), rec('spf', 'missing', 'spf_missing'), rec('dkim', 'missing', 'dkim_missing'), rec('dmarc', 'missing', 'dmarc_missing')];
    const events = verifyDomain(given(added), { records, now });
    expect(events.map((e) => e.type)).to.deep.equal(['DomainOwnershipVerified', 'DomainDnsChecked']);
    const after = given(added, ...events);
    expect(after.ownershipVerified).to.equal(true);
    expect([after.spfConfigured, after.dkimConfigured, after.dmarcConfigured]).to.deep.equal([false, false, false]);
    expect(isSendReady(after)).to.equal(false);
  });
  it('verify: token missing → DomainOwnershipCheckFailed with the reason; still unverified', () => {
    const events = verifyDomain(given(added), { records: [rec('ownership', 'mismatch', 'ownership_token_mismatch')], now });
    expect(events[0]).to.deep.include({ type: 'DomainOwnershipCheckFailed' });
    expect((events[0].data as { reason: string }).reason).to.equal('ownership_token_mismatch');
    expect(given(added, ...events).ownershipVerified).to.equal(false);
  });
  it('verify on a verified domain only records the check', () => {
    const verified: SendingDomainEvent = { type: 'DomainOwnershipVerified', data: { domainId, method: 'dns', verifiedAt: now.toISOString() } };
    expect(verifyDomain(given(added, verified), { records: [rec('ownership', 'missing')], now }).map((e) => e.type)).to.deep.equal(['DomainDnsChecked']);
  });
  it('check-dns: SPF and DKIM ok + ownership → sendReady', () => {
    const verified: SendingDomainEvent = { type: 'DomainOwnershipVerified', data: { domainId, method: 'dns', verifiedAt: now.toISOString() } };
    const events = recordDnsCheck(given(added, verified), { records: [rec('spf', 'ok'), rec('dkim', 'ok'), rec('dmarc', 'missing', 'dmarc_missing')], now });
    const after = given(added, verified, ...events);
    expect(after).to.include({ spfConfigured: true, dkimConfigured: true, dmarcConfigured: false, lastCheckedAt: now.toISOString() });
    expect(isSendReady(after)).to.equal(true);
  });
  it('a lookup error (SERVFAIL, timeout) keeps the previous flag; a definitive miss clears it', () => {
    const ok: SendingDomainEvent = { type: 'DomainDnsChecked', data: { domainId, method: 'dns', spfConfigured: true, dkimConfigured: true, dmarcConfigured: true, checkedAt: now.toISOString() } };
    const flags = flagsFrom(given(added, ok), [rec('spf', 'error', 'dns_servfail'), rec('dkim', 'mismatch', 'dkim_key_mismatch'), rec('dmarc', 'error', 'dns_timeout')]);
    expect(flags).to.deep.equal({ spfConfigured: true, dkimConfigured: false, dmarcConfigured: true });
  });
  it('rotate: txt mode → 409 dkim_rotation_not_available; cname_managed → DomainDkimKeyRotated and the state signs with the new key', () => {
    const key = { algorithm: 'rsa-sha256' as const, publicKey: 'NEW', keyId: '44444444-4444-4444-8444-444444444444' };
    expect(codeOf(() => rotateDkimKey(given(added), { key, now }))).to.equal('dkim_rotation_not_available');
    const managed: SendingDomainEvent = { ...added, data: { ...added.data, dkimMode: 'cname_managed', dkimSelector: 'motor' } } as SendingDomainEvent;
    const events = rotateDkimKey(given(managed), { key, now });
    expect(events[0].type).to.equal('DomainDkimKeyRotated');
    expect(events[0].data).to.include({ previousKeyId: dkim.keyId, dkimKeyId: key.keyId, dkimSelector: 'motor' });
    expect(given(managed, ...events).dkim).to.include({ keyId: key.keyId, publicKey: 'NEW', selector: 'motor' });
  });
  const reserved = { serviceDomain: svc, bounceDomain: null };
  it('domain names: normalised, invalid ones and the service namespace refused', () => {
    expect(parseDomainName(' Example.COM. ', reserved)).to.equal('example.com');
    for (const bad of ['', 'localhost', 'exa mple.com', '-a.com', '1.2.3.4', 'a..com', 42]) expect(codeOf(() => parseDomainName(bad, reserved)), String(bad)).to.equal('invalid_domain');
    expect(codeOf(() => parseDomainName('x.sandbox.motor.test', reserved))).to.equal('domain_reserved');
    expect(codeOf(() => parseDomainName('motor.test', reserved))).to.equal('domain_reserved');
  });
  it('domain names: the bounce domain and every name under it refused, in any case and with a trailing dot; siblings and parents are the tenant\'s', () => {
    const bounces = { serviceDomain: svc, bounceDomain: 'bounces.operator.test' };
    for (const bad of ['bounces.operator.test', 'BOUNCES.Operator.TEST', 'bounces.operator.test.', ' MAIL.BOUNCES.OPERATOR.TEST. ', 'a.b.bounces.operator.test']) {
      expect(codeOf(() => parseDomainName(bad, bounces)), bad).to.equal('domain_reserved');
    }
    for (const ok of ['notbounces.operator.test', 'bounces-operator.test', 'bounces.operator.test.example', 'operator.test', 'x.operator.test']) {
      expect(parseDomainName(ok, bounces), ok).to.equal(ok);
    }
    // Unset: nothing is refused for it.
    expect(parseDomainName('bounces.operator.test', reserved)).to.equal('bounces.operator.test');
  });
  it('domain names: refused when a record name under it would be longer than DNS allows (253), so it could never be verified', () => {
    const named = (length: number) => `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(length - 3 * 64 - 4)}.com`;
    const longest = named(228);
    expect(parseDomainName(longest, reserved)).to.equal(longest);
    for (const r of expectedRecords({ domainId, name: longest, serviceDomain: svc, ownershipToken: 'tok', dkimMode: 'txt', dkim })) expect(r.name.length, r.name).to.be.at.most(253);
    expect(codeOf(() => parseDomainName(named(229), reserved))).to.equal('invalid_domain');
    expect(codeOf(() => parseDomainName(named(253), reserved))).to.equal('invalid_domain');
  });
});

describe('DNS record evaluation (unit)', () => {
  const inputs = { domainId, name: 'example.com', serviceDomain: svc, ownershipToken: 'tok', dkimMode: 'txt' as const, dkim };
  const records = expectedRecords(inputs);
  const ok = (...values: string[]): Lookup => ({ ok: true, values });
  const zone = (over: Record<string, Lookup> = {}) => new Map<string, Lookup>([
    [lookupKey('TXT', '_motor-verification.example.com'), ok('motor-verification=tok')],
    [lookupKey('TXT', 'example.com'), ok('v=spf1 include:_spf.motor.test ~all', 'google-site-verification=x')],
    [lookupKey('TXT', `${dkim.selector}._domainkey.example.com`), ok('v=DKIM1; k=rsa; p=PUB KEY')],
    [lookupKey('TXT', '_dmarc.example.com'), ok('v=DMARC1; p=none')],
    ...Object.entries(over),
  ]);
  const evaluate = (over: Record<string, Lookup> = {}, rs = records) => evaluateRecords(rs, zone(over), { serviceDomain: svc, publicKey: 'PUBKEY' });
  const by = (checks: DomainRecordCheck[], purpose: string) => checks.find((c) => c.purpose === purpose)!;

  it('lists ownership, SPF, DKIM, DMARC with what to publish', () => {
    expect(records.map((r) => [r.purpose, r.type, r.name])).to.deep.equal([
      ['ownership', 'TXT', '_motor-verification.example.com'], ['spf', 'TXT', 'example.com'],
      ['dkim', 'TXT', `${dkim.selector}._domainkey.example.com`], ['dmarc', 'TXT', '_dmarc.example.com'],
    ]);
    expect(by(records as DomainRecordCheck[], 'spf').value).to.equal('v=spf1 include:_spf.motor.test ~all');
    expect(by(records as DomainRecordCheck[], 'ownership').value).to.equal('motor-verification=tok');
  });
  it('a correct zone: every record ok', () => {
    expect(evaluate().map((c) => c.status)).to.deep.equal(['ok', 'ok', 'ok', 'ok']);
  });
  it('SPF reasons: missing, include missing (with the record found), several records', () => {
    expect(by(evaluate({ [lookupKey('TXT', 'example.com')]: ok('something-else') }), 'spf')).to.include({ status: 'missing', reason: 'spf_missing' });
    const wrong = by(evaluate({ [lookupKey('TXT', 'example.com')]: ok('v=spf1 include:_spf.google.com ~all') }), 'spf');
    expect(wrong).to.include({ status: 'mismatch', reason: 'spf_include_missing' });
    expect(wrong.found).to.deep.equal(['v=spf1 include:_spf.google.com ~all']);
    expect(by(evaluate({ [lookupKey('TXT', 'example.com')]: ok('v=spf1 include:_spf.motor.test ~all', 'v=spf1 -all') }), 'spf')).to.include({ reason: 'spf_multiple_records' });
    expect(by(evaluate({ [lookupKey('TXT', 'example.com')]: ok('v=spf1 +include:_SPF.motor.test -all') }), 'spf').status).to.equal('ok');
    expect(by(evaluate({ [lookupKey('TXT', 'example.com')]: ok('v=spf1 redirect=_spf.motor.test') }), 'spf').status).to.equal('ok');
  });

  it('SPF: an include after the all mechanism is never evaluated, nor a redirect beside one (RFC 7208 §5.1, §6.1)', () => {
    const spf = (record: string) => by(evaluate({ [lookupKey('TXT', 'example.com')]: ok(record) }), 'spf');
    expect(spf('v=spf1 include:_spf.google.com ~all include:_spf.motor.test')).to.include({ status: 'mismatch', reason: 'spf_include_missing' });
    expect(spf('v=spf1 -all redirect=_spf.motor.test')).to.include({ status: 'mismatch', reason: 'spf_include_missing' });
    expect(spf('v=spf1 mx include:_spf.motor.test ?all').status).to.equal('ok');
    expect(spf('v=spf1 mx redirect=_spf.motor.test').status).to.equal('ok');
  });
  it('DKIM reasons: missing, wrong key', () => {
    const name = lookupKey('TXT', `${dkim.selector}._domainkey.example.com`);
    expect(by(evaluate({ [name]: { ok: false, failure: 'nxdomain' } }), 'dkim')).to.include({ status: 'missing', reason: 'dkim_missing' });
    const wrong = by(evaluate({ [name]: ok('v=DKIM1; k=rsa; p=OTHER') }), 'dkim');
    expect(wrong).to.include({ status: 'mismatch', reason: 'dkim_key_mismatch' });
    expect(wrong.found).to.deep.equal(['v=DKIM1; k=rsa; p=OTHER']);
  });
  it('DMARC missing, ownership token wrong, lookup failures', () => {
    expect(by(evaluate({ [lookupKey('TXT', '_dmarc.example.com')]: { ok: false, failure: 'nodata' } }), 'dmarc')).to.include({ status: 'missing', reason: 'dmarc_missing' });
    expect(by(evaluate({ [lookupKey('TXT', '_motor-verification.example.com')]: ok('motor-verification=nope') }), 'ownership')).to.include({ status: 'mismatch', reason: 'ownership_token_mismatch' });
    expect(by(evaluate({ [lookupKey('TXT', 'example.com')]: { ok: false, failure: 'servfail' } }), 'spf')).to.include({ status: 'error', reason: 'dns_servfail' });
    expect(by(evaluate({ [lookupKey('TXT', '_dmarc.example.com')]: { ok: false, failure: 'timeout' } }), 'dmarc')).to.include({ status: 'error', reason: 'dns_timeout' });
  });
  it('cname_managed: the CNAME record, its target, and the reasons when it is wrong', () => {
    const managed = expectedRecords({ ...inputs, dkimMode: 'cname_managed', dkim: { ...dkim, selector: 'motor' } });
    const cname = by(managed as DomainRecordCheck[], 'dkim');
    expect(cname).to.include({ type: 'CNAME', name: 'motor._domainkey.example.com', value: `motor.${domainId}.dkim.motor.test` });
    expect(lookupsFor(managed).map((l) => `${l.rrtype} ${l.name}`)).to.include.members(['CNAME motor._domainkey.example.com', 'TXT motor._domainkey.example.com']);
    const c = lookupKey('CNAME', 'motor._domainkey.example.com');
    const t = lookupKey('TXT', 'motor._domainkey.example.com');
    expect(by(evaluate({ [c]: ok(`motor.${domainId}.dkim.motor.test`), [t]: ok('v=DKIM1; p=PUBKEY') }, managed), 'dkim').status).to.equal('ok');
    expect(by(evaluate({ [c]: ok('elsewhere.example.net'), [t]: ok('v=DKIM1; p=PUBKEY') }, managed), 'dkim')).to.include({ status: 'mismatch', reason: 'dkim_cname_wrong_target' });
    expect(by(evaluate({ [c]: { ok: false, failure: 'nodata' }, [t]: ok('v=DKIM1; p=PASTED') }, managed), 'dkim')).to.deep.include({ status: 'missing', reason: 'dkim_cname_missing', found: ['v=DKIM1; p=PASTED'] });
    expect(by(evaluate({ [c]: ok(`motor.${domainId}.dkim.motor.test`), [t]: ok('v=DKIM1; p=OLD') }, managed), 'dkim')).to.include({ status: 'mismatch', reason: 'dkim_key_not_published' });
  });
});

describe('service DKIM zone lines (unit)', () => {
  it('one TXT line per managed domain, split into 255-byte strings', () => {
    const value = `v=DKIM1; k=rsa; p=${'A'.repeat(400)}`;
    const [line] = zoneLines([{ name: 'motor.x.dkim.motor.test', value }]);
    expect(line.startsWith('motor.x.dkim.motor.test. 300 IN TXT "v=DKIM1; k=rsa; p=')).to.equal(true);
    const strings = [...line.matchAll(/"([^"]*)"/g)].map((m) => m[1]);
    expect(strings.map((s) => s.length)).to.deep.equal([255, value.length - 255]);
    expect(strings.join('')).to.equal(value);
  });
});
