import { expect } from 'chai';
import { diagnostic, parseFieldBlocks, readDeliveryStatus, readFeedbackReport, statusCode, stripComments, typedAddress } from '../../../smtp/inbound/reportFields';
import { bounceAddress, messageIdOfBounceAddress, returnPathSettings } from '../../../smtp/inbound/returnPath';

describe('inbound report fields (unit)', () => {
  describe('parseFieldBlocks', () => {
    it('splits blocks at blank lines, unfolds continuation lines, lower-cases names, keeps repeated fields', () => {
      const blocks = parseFieldBlocks('Reporting-MTA: dns; mx.example\r\n\r\nFINAL-recipient: rfc822;\r\n\t a@x.test\r\nX-A: 1\nx-a: 2\n');
      expect(blocks).to.have.length(2);
      expect(blocks[0].get('reporting-mta')).to.deep.equal(['dns; mx.example']);
      expect(blocks[1].get('final-recipient')).to.deep.equal(['rfc822; a@x.test']);
      expect(blocks[1].get('x-a')).to.deep.equal(['1', '2']);
    });
    it('skips garbage lines and continuations without a field, and lines of blanks end a block', () => {
      const blocks = parseFieldBlocks('  orphan continuation\nthis is no field\n\u0000\u0001:\nAction: failed\n   \nStatus: 5.0.0');
      expect(blocks.map((b) => [...b.keys()])).to.deep.equal([['action'], ['status']]);
    });
    it('nothing at all, or only blank lines: no block', () => {
      expect(parseFieldBlocks('')).to.deep.equal([]);
      expect(parseFieldBlocks('\r\n\r\n  \r\n')).to.deep.equal([]);
    });
  });

  it('stripComments removes nested comments outside quoted strings', () => {
    expect(stripComments('failed (permanent (really)) ')).to.equal('failed');
    expect(stripComments('rfc822; "a (b)"@x.test (note)')).to.equal('rfc822; "a (b)"@x.test');
  });

  it('typedAddress: rfc822 and utf-8 types, angle brackets, comments, domain lower case; other types and garbage are null', () => {
    expect(typedAddress('rfc822; User@X.Test')).to.equal('User@x.test');
    expect(typedAddress('RFC822;<a@x.test> (the recipient)')).to.equal('a@x.test');
    expect(typedAddress('utf-8; a@x.test')).to.equal('a@x.test');
    expect(typedAddress('<a@x.test>')).to.equal('a@x.test');
    expect(typedAddress('x400; /C=US/')).to.equal(null);
    expect(typedAddress('rfc822; not an address')).to.equal(null);
    expect(typedAddress('redacted')).to.equal(null);
    expect(typedAddress(null)).to.equal(null);
  });

  it('statusCode and diagnostic', () => {
    expect(statusCode('5.1.1 (bad destination mailbox address)')).to.equal('5.1.1');
    expect(statusCode('4.4.7')).to.equal('4.4.7');
    expect(statusCode('9.9.9')).to.equal(null);
    expect(statusCode('5.1.1234')).to.equal(null);
    expect(diagnostic('smtp; 550 5.1.1 <a@x.test>: Recipient address rejected')).to.deep.equal({
      smtpCode: '550', enhancedCode: '5.1.1', text: '550 5.1.1 <a@x.test>: Recipient address rejected',
    });
    expect(diagnostic('SMTP;550-5.2.1 The email account is disabled')).to.include({ smtpCode: '550', enhancedCode: '5.2.1' });
    expect(diagnostic('X-Postfix; host unreachable')).to.deep.equal({ smtpCode: null, enhancedCode: null, text: 'host unreachable' });
    expect(diagnostic('smtp;')).to.equal(null);
  });

  it('readDeliveryStatus: one entry per recipient block, the per-message block left out', () => {
    const r = readDeliveryStatus([
      'Reporting-MTA: dns; mx.rcpt.test', 'Arrival-Date: Sat, 28 Nov 2026 21:00:00 +0000', '',
      'Original-Recipient: rfc822;One@Rcpt.Test', 'Final-Recipient: rfc822; one@rcpt.test', 'action: FAILED (permanent)',
      'Status: 5.1.1', 'Remote-MTA: dns; MX.rcpt.test', 'Diagnostic-Code: smtp; 550 5.1.1 <one@rcpt.test>:', ' User unknown', '',
      'Final-Recipient: rfc822; two@rcpt.test', 'Action: delayed', 'Status: 4.4.1', '',
    ].join('\r\n'));
    expect(r).to.deep.equal([
      {
        originalRecipient: 'One@rcpt.test', finalRecipient: 'one@rcpt.test', action: 'failed', enhancedCode: '5.1.1', smtpCode: '550',
        smtpResponse: '550 5.1.1 <one@rcpt.test>: User unknown', remoteMta: 'mx.rcpt.test',
      },
      { originalRecipient: null, finalRecipient: 'two@rcpt.test', action: 'delayed', enhancedCode: '4.4.1', smtpCode: null, smtpResponse: null, remoteMta: null },
    ]);
  });

  it('readDeliveryStatus: missing fields are null, garbage gives nothing', () => {
    expect(readDeliveryStatus('Action: failed')).to.deep.equal([
      { originalRecipient: null, finalRecipient: null, action: 'failed', enhancedCode: null, smtpCode: null, smtpResponse: null, remoteMta: null },
    ]);
    expect(readDeliveryStatus('\u0000garbage\n\n%%%')).to.deep.equal([]);
  });

  it('readFeedbackReport: type lower case, every Original-Rcpt-To, redacted ones left out', () => {
    expect(readFeedbackReport('Feedback-Type: Abuse\r\nUser-Agent: ISP/1.0\r\nVersion: 1\r\nOriginal-Mail-From: <bounces+x@b.test>\r\nOriginal-Rcpt-To: <a@x.test>\r\nOriginal-Rcpt-To: redacted\r\n'))
      .to.deep.equal({ feedbackType: 'abuse', originalRcptTo: ['a@x.test'], originalMailFrom: 'bounces+x@b.test' });
    expect(readFeedbackReport('Version: 1')).to.deep.equal({ feedbackType: null, originalRcptTo: [], originalMailFrom: null });
    expect(readFeedbackReport('Feedback-Type: <script>')).to.include({ feedbackType: null });
  });
});

describe('bounce address (unit)', () => {
  const s = returnPathSettings('Bounces.Example.Test', 'test-token-secret-0123456789abcdef0123');
  const id = '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b';

  it('is bounces+<32 hex id><16 hex tag>@domain, lower case, local part within 64 characters', () => {
    const a = bounceAddress(id, s);
    expect(a).to.match(/^bounces\+0193a1b2c3d47e5f8a9b0c1d2e3f4a5b[0-9a-f]{16}@bounces\.example\.test$/);
    expect(a.split('@')[0].length).to.be.at.most(64);
  });
  it('reads back the message id, whatever the case; refuses a forged tag, another domain, another secret', () => {
    const a = bounceAddress(id, s);
    expect(messageIdOfBounceAddress(a, s)).to.equal(id);
    expect(messageIdOfBounceAddress(a.toUpperCase(), s)).to.equal(id);
    const forged = a.replace(/[0-9a-f](?=@)/, (c) => (c === '0' ? '1' : '0'));
    expect(messageIdOfBounceAddress(forged, s)).to.equal(null);
    expect(messageIdOfBounceAddress(a.replace('bounces.example.test', 'other.test'), s)).to.equal(null);
    expect(messageIdOfBounceAddress(a, returnPathSettings('bounces.example.test', 'another-secret-0123456789abcdef0123456'))).to.equal(null);
    expect(messageIdOfBounceAddress('postmaster@bounces.example.test', s)).to.equal(null);
  });
});
