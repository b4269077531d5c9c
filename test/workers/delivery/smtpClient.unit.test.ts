import { expect } from 'chai';
import { MAX_REPLY_TEXT, groupByDomain, hostReasons, outcomeForCode, parseReply, triedReasons } from '../../../workers/delivery/smtpClient.js';

describe('smtpClient (pure parts)', () => {
  it('groupByDomain groups case-insensitively by domain, keeping order and the addresses as given', () => {
    const groups = groupByDomain(['a@Example.com', 'b@other.org', 'c@example.COM', 'nodomain']);
    expect([...groups]).to.deep.equal([
      ['example.com', ['a@Example.com', 'c@example.COM']],
      ['other.org', ['b@other.org']],
      ['', ['nodomain']],
    ]);
  });

  it('parseReply drops U+0000 and caps the text without cutting a surrogate pair in two', () => {
    expect(parseReply('550 5.1.1 No such\u0000 user').response).to.equal('550 5.1.1 No such user');
    const long = parseReply(`550 ${'x'.repeat(MAX_REPLY_TEXT - 5)}😀 tail`).response;
    expect(long.length).to.be.at.most(MAX_REPLY_TEXT);
    expect(long.isWellFormed()).to.equal(true);
    expect(long).to.equal(`550 ${'x'.repeat(MAX_REPLY_TEXT - 5)}`);
  });

  it('parseReply extracts the code and the enhanced status code', () => {
    expect(parseReply('450 4.2.0 Greylisted, try later')).to.deep.equal({ code: '450', enhancedCode: '4.2.0', response: '450 4.2.0 Greylisted, try later' });
    expect(parseReply('250-2.0.0 first\n250 2.0.0 Ok: queued')).to.include({ code: '250', enhancedCode: '2.0.0' });
    expect(parseReply('550 No such user')).to.include({ code: '550', enhancedCode: null });
    expect(parseReply('554 5.7.1')).to.include({ code: '554', enhancedCode: '5.7.1' });
  });

  it('outcomeForCode maps 2xx/4xx/5xx to delivered/deferred/bounced', () => {
    expect(['250', '251', '421', '450', '550', '554'].map(outcomeForCode)).to.deep.equal(['delivered', 'delivered', 'deferred', 'deferred', 'bounced', 'bounced']);
  });

  it('hostReasons names each host once after the prefix, and stays within the smtpResponse limit by leaving whole hosts out', () => {
    const prefix = 'MTA-STS policy of rcpt.test (enforce): ';
    expect(hostReasons(prefix, ['mx1.rcpt.test is not a listed MX'])).to.equal(`${prefix}mx1.rcpt.test is not a listed MX`);
    expect(hostReasons(prefix, ['a is not a listed MX', 'b does not offer STARTTLS', 'b does not offer STARTTLS'])).to.equal(`${prefix}a is not a listed MX; b does not offer STARTTLS`);

    const long = Array.from({ length: 10 }, (_, i) => `certificate of mx${i}.rcpt.test not valid: ${'x'.repeat(1000)}`);
    const text = hostReasons(prefix, long);
    expect(text.length).to.be.at.most(MAX_REPLY_TEXT);
    const entries = text.slice(prefix.length).split('; ');
    // Each reason cut at 600 characters and marked; the hosts that did not fit counted, not cut.
    expect(entries.slice(0, -1).every((e, i) => e.startsWith(`certificate of mx${i}.rcpt.test`) && e.length === 600 && e.endsWith('...'))).to.equal(true);
    expect(entries.at(-1)).to.equal(`${10 - (entries.length - 1)} more hosts not shown`);
    expect(hostReasons(prefix, long.slice(0, 2), 700)).to.equal(`${prefix}${long[0].slice(0, 597)}...; 1 more host not shown`);
  });

  it('triedReasons names the address only of a host of which several were tried; a policy refusal reads as given', () => {
    expect(triedReasons([
      { mx: 'mx0.rcpt.test', address: null, reason: 'Host mx0.rcpt.test has no A/AAAA record' },
      { mx: 'mx1.rcpt.test', address: '192.0.2.1', reason: 'ECONNECTION: Connection closed unexpectedly' },
      { mx: 'mx2.rcpt.test', address: '192.0.2.2', reason: 'ECONNECTION: Connection closed unexpectedly' },
      { mx: 'mx2.rcpt.test', address: '2001:db8::2', reason: 'ECONNECTION: Connection closed unexpectedly' },
      { mx: 'mx3.rcpt.test', address: null, reason: 'mx3.rcpt.test is not a listed MX', namesHost: true },
    ])).to.deep.equal([
      'mx0.rcpt.test: Host mx0.rcpt.test has no A/AAAA record',
      'mx1.rcpt.test: ECONNECTION: Connection closed unexpectedly',
      'mx2.rcpt.test[192.0.2.2]: ECONNECTION: Connection closed unexpectedly',
      'mx2.rcpt.test[2001:db8::2]: ECONNECTION: Connection closed unexpectedly',
      'mx3.rcpt.test is not a listed MX',
    ]);
  });
});
