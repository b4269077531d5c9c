import { expect } from 'chai';
import { checkSyntax } from '../../domain/emailValidation/syntax';
import { suggestDomain } from '../../domain/emailValidation/suggest';
import { isDisposableDomain, isRoleAccount } from '../../domain/emailValidation/lists';
import vectors from './data/isemail-tests.json';

/**
 * Syntax against the published is_email test vectors (npm isemail@1.2.0, test/tests.json; see
 * data/README.md). is_email's own threshold decides "valid": diagnoses below 16 (valid, dnsWarn*,
 * rfc5321*) are mailboxes an MTA accepts; cfws*, deprecated*, rfc5322* and err* are not. DNS is
 * not part of this comparison (dnsWarn* cases are syntax-valid).
 */
describe('email validation: syntax and flags (unit)', () => {
  it('agrees with the is_email test vectors', () => {
    const tests = vectors as Array<[string, string]>;
    const disagreements: string[] = [];
    for (const [address, diagnosis] of tests) {
      const expected = diagnosis === 'valid' || diagnosis.startsWith('dnsWarn') || diagnosis.startsWith('rfc5321');
      if (checkSyntax(address).ok !== expected) disagreements.push(`${JSON.stringify(address)} (${diagnosis})`);
    }
    console.log(`      is_email vectors: ${tests.length - disagreements.length}/${tests.length} agree`); // eslint-disable-line no-console
    expect(disagreements, disagreements.join('\n')).to.deep.equal([]);
  });

  it('accepts quoted local parts, IP literals and internationalised addresses', () => {
    for (const ok of ['"john doe"@example.com', '"a\\"b"@example.com', 'user@[192.0.2.1]', 'user@[IPv6:2001:db8::1]', '用户@例子.广告', 'δοκιμή@παράδειγμα.δοκιμή', 'josé@bücher.de', 'a+tag@example.com']) {
      expect(checkSyntax(ok).ok, ok).to.equal(true);
    }
    for (const [bad, reason] of [['a@[300.1.1.1]', 'invalid_address_literal'], ['a@[IPv6:zz::1]', 'invalid_address_literal'], ['a b@example.com', 'invalid_local_part'],
      ['"unclosed@example.com', 'unclosed_quoted_string'], ['a@-x.com', 'invalid_domain'], [`${'a'.repeat(65)}@example.com`, 'local_part_too_long'], ['a@b..c', 'invalid_domain'], ['plain', 'no_at_sign']] as const) {
      const r = checkSyntax(bad);
      expect(r.ok, bad).to.equal(false);
      if (!r.ok) expect(r.reason, bad).to.equal(reason);
    }
    const r = checkSyntax('José@Bücher.DE');
    expect(r.ok && r.asciiDomain).to.equal('xn--bcher-kva.de');
    expect(r.ok && r.normalized).to.equal('José@bücher.de');
  });

  it('suggests the common provider for a typo, and flags disposable and role addresses from the lists', () => {
    expect(suggestDomain('gmial.com')).to.equal('gmail.com');
    expect(suggestDomain('hotmial.com')).to.equal('hotmail.com');
    expect(suggestDomain('yahoo.con')).to.equal('yahoo.com');
    expect(suggestDomain('gmail.com')).to.equal(null);
    expect(suggestDomain('example.org')).to.equal(null);
    expect(isDisposableDomain('mailinator.com')).to.equal(true);
    expect(isDisposableDomain('example.com')).to.equal(false);
    expect(isRoleAccount('info')).to.equal(true);
    expect(isRoleAccount('noreply+x')).to.equal(true);
    expect(isRoleAccount('alice')).to.equal(false);
  });
});
