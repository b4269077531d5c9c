import { expect } from 'chai';
import { isDomainError } from '../../domain/errors';
import { isReservedHeader, isValidAddress, validateSendRequest, type SendRequestBody } from '../../domain/message/sendRules';

function codeOf(body: SendRequestBody): string {
  try {
    validateSendRequest(body);
  } catch (e) {
    if (isDomainError(e)) return `${e.status} ${e.code}`;
    throw e;
  }
  return 'ok';
}

const base = { from: 'app@example.com', to: 'user@example.org', subject: 'Hi', text: 'Hello' };

describe('send rules (unit)', () => {
  it('accepts a minimal request and normalises `to` to an array', () => {
    const r = validateSendRequest(base);
    expect(r.to).to.deep.equal(['user@example.org']);
    expect(r.dryRun).to.equal(false);
    expect(r.bodySize).to.equal(5);
  });

  it('refuses missing from, to, subject and body with 422 validation_error', () => {
    expect(codeOf({ ...base, from: undefined })).to.equal('422 validation_error');
    expect(codeOf({ ...base, to: undefined })).to.equal('422 validation_error');
    expect(codeOf({ ...base, to: [] })).to.equal('422 validation_error');
    expect(codeOf({ ...base, subject: '' })).to.equal('422 validation_error');
    expect(codeOf({ ...base, text: undefined })).to.equal('422 validation_error');
  });

  it('refuses a display name in from (fromName is the way) and bad recipient shapes', () => {
    expect(codeOf({ ...base, from: 'App <app@example.com>' })).to.equal('422 validation_error');
    expect(codeOf({ ...base, to: ['ok@example.org', 'not-an-address'] })).to.equal('422 validation_error');
  });

  it('caps fromName at 78 characters (counted as characters, not bytes)', () => {
    expect(codeOf({ ...base, fromName: 'é'.repeat(78) })).to.equal('ok');
    expect(codeOf({ ...base, fromName: 'x'.repeat(79) })).to.equal('422 validation_error');
  });

  it('refuses every reserved header name with 400 DISALLOWED_HEADERS', () => {
    for (const name of ['From', 'sender', 'Return-Path', 'To', 'Cc', 'Bcc', 'Subject', 'Date', 'Message-ID', 'MIME-Version',
      'Content-Type', 'content-transfer-encoding', 'DKIM-Signature', 'Received', 'Authentication-Results', 'ARC-Seal', 'X-Service-Foo']) {
      expect(isReservedHeader(name), name).to.equal(true);
      expect(codeOf({ ...base, headers: { [name]: 'x' } }), name).to.equal('400 DISALLOWED_HEADERS');
    }
    expect(codeOf({ ...base, headers: { 'X-Campaign': 'spring' } })).to.equal('ok');
  });

  it('refuses a custom header name DKIM cannot sign (\';\') or too long for a header line (over 100 characters)', () => {
    expect(codeOf({ ...base, headers: { 'X-Tag;l=0': '1' } })).to.equal('422 validation_error');
    expect(codeOf({ ...base, headers: { [`X-${'a'.repeat(99)}`]: '1' } })).to.equal('422 validation_error');
    expect(codeOf({ ...base, headers: { [`X-${'a'.repeat(98)}`]: '1', 'X-Ok=1': 'y' } })).to.equal('ok');
  });

  it('refuses __proto__ as a header name or metadata key (an assignment would set the prototype and drop it silently)', () => {
    expect(codeOf({ ...base, headers: JSON.parse('{"__proto__":"x"}') })).to.equal('422 validation_error');
    expect(codeOf({ ...base, metadata: JSON.parse('{"__proto__":"x"}') })).to.equal('422 validation_error');
  });

  it('refuses CR or LF in a header value with DISALLOWED_HEADERS', () => {
    expect(codeOf({ ...base, headers: { 'X-Campaign': 'a\r\nBcc: victim@example.net' } })).to.equal('400 DISALLOWED_HEADERS');
    expect(codeOf({ ...base, headers: { 'X-Campaign': 'a\nb' } })).to.equal('400 DISALLOWED_HEADERS');
  });

  it('deduplicates recipients case-insensitively, keeping the first spelling', () => {
    expect(validateSendRequest({ ...base, to: ['A@example.org', 'a@EXAMPLE.org', 'b@example.org'] }).to).to.deep.equal(['A@example.org', 'b@example.org']);
  });

  it('validates addresses: quoted local parts, IP literals, IDN; rejects junk', () => {
    for (const ok of ['"john doe"@example.com', 'user@[192.0.2.1]', '用户@例子.广告', 'a.b+tag@sub.example.co.uk']) expect(isValidAddress(ok), ok).to.equal(true);
    for (const bad of ['a@b', '@example.com', 'a..b@example.com', 'a@-example.com', 'a b@example.com', 'a@example.123']) expect(isValidAddress(bad), bad).to.equal(false);
    // Internationalized domains need A-labels to be delivered: these have none (or an empty one).
    for (const bad of ['a@⒈.test', 'a@\u00ad.test', 'a@a\u200d.test']) expect(isValidAddress(bad), JSON.stringify(bad)).to.equal(false);
    expect(isValidAddress('a@bücher.example')).to.equal(true);
  });
});
