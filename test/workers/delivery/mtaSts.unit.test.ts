import { expect } from 'chai';
import { mxAllowed, mxPatternMatches, parseStsPolicy, parseStsRecord, type MtaStsPolicy } from '../../../workers/delivery/mtaSts.js';

describe('MTA-STS policy parsing (RFC 8461)', () => {
  describe('the _mta-sts TXT record (§3.1)', () => {
    it('takes the id of the one v=STSv1 record, its strings joined', () => {
      expect(parseStsRecord([['v=STSv1; id=20260101T000000;']])).to.equal('20260101T000000');
      expect(parseStsRecord([['v=STSv1; ', 'id=abc123']])).to.equal('abc123');
      expect(parseStsRecord([['some other record'], ['v=STSv1;id=x1;']])).to.equal('x1');
    });

    it('is no policy with none, two, or one without a valid id', () => {
      expect(parseStsRecord([])).to.equal(null);
      expect(parseStsRecord([['v=STSv1; id=a;'], ['v=STSv1; id=b;']])).to.equal(null);
      expect(parseStsRecord([['v=STSv1;']])).to.equal(null);
      expect(parseStsRecord([['v=STSv1; id=has-dash;']])).to.equal(null);
      expect(parseStsRecord([[`v=STSv1; id=${'a'.repeat(33)};`]])).to.equal(null);
      expect(parseStsRecord([['v=STSv2; id=abc;']])).to.equal(null);
      expect(parseStsRecord([['id=abc; v=STSv1;']]), 'v= must come first').to.equal(null);
    });
  });

  describe('the policy file (§3.2)', () => {
    const valid = 'version: STSv1\nmode: enforce\nmx: mx1.example.com\nmx: *.mail.example.com\nmax_age: 86400\n';

    it('reads version, mode, every mx and max_age, with LF or CRLF lines', () => {
      const expected: MtaStsPolicy = { id: 'id1', mode: 'enforce', mx: ['mx1.example.com', '*.mail.example.com'], maxAgeSeconds: 86400 };
      expect(parseStsPolicy(valid, 'id1')).to.deep.equal(expected);
      expect(parseStsPolicy(valid.replace(/\n/g, '\r\n'), 'id1')).to.deep.equal(expected);
      expect(parseStsPolicy('max_age:604800\r\nmx:MX.Example.COM.\r\nmode:testing\r\nversion:STSv1', 'x')).to.deep.equal({ id: 'x', mode: 'testing', mx: ['mx.example.com'], maxAgeSeconds: 604800 });
    });

    it('ignores unknown keys and uses the first of a repeated one', () => {
      expect(parseStsPolicy(`${valid}future_field: anything at all\nmode: none\n`, 'id1')).to.include({ mode: 'enforce' });
    });

    it('takes mode none without mx (the end of a policy)', () => {
      expect(parseStsPolicy('version: STSv1\nmode: none\nmax_age: 0\n', 'i')).to.deep.equal({ id: 'i', mode: 'none', mx: [], maxAgeSeconds: 0 });
    });

    it('refuses a bad version, a bad or missing mode, a missing mx, max_age out of bounds, a line that is no field', () => {
      expect(parseStsPolicy(valid.replace('STSv1', 'STSv2'), 'i')).to.be.a('string');
      expect(parseStsPolicy(valid.replace('version: STSv1\n', ''), 'i')).to.be.a('string');
      expect(parseStsPolicy(valid.replace('enforce', 'strict'), 'i')).to.be.a('string');
      expect(parseStsPolicy(valid.replace('mode: enforce\n', ''), 'i')).to.be.a('string');
      expect(parseStsPolicy('version: STSv1\nmode: enforce\nmax_age: 86400\n', 'i')).to.equal('no mx');
      expect(parseStsPolicy(valid.replace('86400', '31557600'), 'i')).to.include({ maxAgeSeconds: 31_557_600 });
      expect(parseStsPolicy(valid.replace('86400', '31557601'), 'i')).to.be.a('string');
      expect(parseStsPolicy(valid.replace('86400', '-1'), 'i')).to.be.a('string');
      expect(parseStsPolicy(valid.replace('86400', '1d'), 'i')).to.be.a('string');
      expect(parseStsPolicy(valid.replace('max_age: 86400\n', ''), 'i')).to.be.a('string');
      expect(parseStsPolicy(`${valid}<html>\n`, 'i')).to.be.a('string');
      expect(parseStsPolicy(valid.replace('mx1.example.com', 'mx1.*.example.com'), 'i')).to.be.a('string');
      expect(parseStsPolicy(valid.replace('mx1.example.com', 'mx1.example.com:25'), 'i')).to.be.a('string');
    });
  });

  describe('mx patterns (§4.1)', () => {
    it('matches a name exactly, ignoring case and a final dot', () => {
      expect(mxPatternMatches('mx.example.com', 'MX.example.com.')).to.equal(true);
      expect(mxPatternMatches('mx.example.com', 'mx2.example.com')).to.equal(false);
    });

    it('lets *. stand for exactly one leftmost label', () => {
      expect(mxPatternMatches('*.example.com', 'mx1.example.com')).to.equal(true);
      expect(mxPatternMatches('*.example.com', 'a.b.example.com')).to.equal(false);
      expect(mxPatternMatches('*.example.com', 'example.com')).to.equal(false);
      expect(mxPatternMatches('*.example.com', '.example.com')).to.equal(false);
      expect(mxPatternMatches('*.example.com', 'mx1.example.org')).to.equal(false);
    });

    it('allows a host any pattern of the policy matches', () => {
      const policy: MtaStsPolicy = { id: 'i', mode: 'enforce', mx: ['mx.rcpt.test', '*.backup.test'], maxAgeSeconds: 60 };
      expect(mxAllowed(policy, 'mx.rcpt.test')).to.equal(true);
      expect(mxAllowed(policy, 'b1.backup.test')).to.equal(true);
      expect(mxAllowed(policy, 'mx.other.test')).to.equal(false);
    });
  });
});
