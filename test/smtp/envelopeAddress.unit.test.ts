import { expect } from 'chai';
import { envelopeAddress, withAsciiDomain } from '../../smtp/submission';

describe('envelope addresses without SMTPUTF8 (smtp/submission.ts, unit)', () => {
  it('keeps ASCII addresses as they are, IP literals and quoted local parts included', () => {
    for (const a of ['app@example.com', 'App@Example.COM', 'a@[192.0.2.1]', '"a@b"@example.com', 'bob@xn--bcher-kva.test']) {
      expect(envelopeAddress(a), a).to.deep.equal({ ok: true, address: a });
    }
  });

  it('puts an internationalized domain in A-labels, and refuses one that has none', () => {
    expect(envelopeAddress('ana@bücher.test')).to.deep.equal({ ok: true, address: 'ana@xn--bcher-kva.test' });
    expect(envelopeAddress('ana@BÜCHER.test')).to.deep.equal({ ok: true, address: 'ana@xn--bcher-kva.test' });
    expect(envelopeAddress('a@⒈.test')).to.deep.equal({ ok: false, reason: 'bad_domain' });
    expect(withAsciiDomain('App <x>')).to.equal('App <x>');
    expect(withAsciiDomain('app@münchen.test')).to.equal('app@xn--mnchen-3ya.test');
  });

  it('refuses a non-ASCII local part, whatever the domain', () => {
    for (const a of ['üser@rcpt.test', '用户@bücher.test', '"é"@example.com']) {
      expect(envelopeAddress(a), a).to.deep.equal({ ok: false, reason: 'non_ascii_local_part' });
    }
  });
});
