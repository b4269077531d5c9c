import { InvalidEventDataError } from '../../domain/eventStore';
import { expect } from 'chai';
import { fail } from '../../domain/errors';
import { formatReply, replyFor } from '../../smtp/replies';
import { gateFor, DEFAULT_AUTH_LIMITS } from '../../smtp/authLimiter';
import { KnownClients } from '../../smtp/server';

describe('smtp/replies: DomainError → SMTP reply (unit)', () => {
  const quota = (code: string, dimension: string) => fail(code, 429, 'x', {
    details: { retryAfterSeconds: 42, dimension, rateLimit: { limit: 3, used: 3, remaining: 0, reset: 42 } },
  });

  it('block quota: the exact text of the spec', () => {
    for (const d of ['burst', 'hourly', 'daily']) {
      expect(formatReply(replyFor(quota('rate_limited_block', d)))).to.equal(`451 4.7.1 Rate limit exceeded (${d}): 3/3. Retry in 42s.`);
    }
  });

  it('account quota: the account-wide form followed by details', () => {
    for (const d of ['acct_hourly', 'acct_daily']) {
      expect(formatReply(replyFor(quota('rate_limited_account', d)))).to.equal(`451 4.7.1 account-wide send limit exceeded (${d}): 3/3. Retry in 42s.`);
    }
  });

  it('maps every send error code to a reply code and enhanced code', () => {
    const table: Array<[string, number, number, string]> = [
      ['from_domain_mismatch', 403, 553, '5.7.1'],
      ['null_sender_not_allowed', 403, 553, '5.7.1'],
      ['DOMAIN_DNS_INCOMPLETE', 403, 554, '5.7.1'],
      ['use_comms_api', 403, 554, '5.7.1'],
      ['motor_block_inactive', 403, 554, '5.7.1'],
      ['validation_error', 422, 554, '5.6.0'],
      ['DISALLOWED_HEADERS', 400, 554, '5.6.0'],
      ['invalid_message', 554, 554, '5.6.0'],
      ['rate_limited_warmup', 429, 451, '4.7.1'],
      ['recipients_exceed_limit', 422, 552, '5.5.3'],
      ['some_future_limit', 429, 451, '4.7.1'],
      ['some_future_outage', 503, 451, '4.3.0'],
      ['some_future_refusal', 403, 554, '5.7.1'],
    ];
    for (const [code, status, smtp, enhanced] of table) {
      expect(replyFor(fail(code, status, 'm')), code).to.deep.include({ code: smtp, enhanced });
    }
  });

  it('at MAIL FROM a permanent refusal is 550, not DATA\'s 554 (RFC 5321 4.3.2); 553, 451 and the enhanced codes stay', () => {
    const table: Array<[string, number, number, string]> = [
      ['from_domain_mismatch', 403, 553, '5.7.1'],
      ['DOMAIN_DNS_INCOMPLETE', 403, 550, '5.7.1'],
      ['use_comms_api', 403, 550, '5.7.1'],
      ['motor_block_inactive', 403, 550, '5.7.1'],
      ['invalid_api_key', 401, 550, '5.7.1'],
      ['some_future_refusal', 403, 550, '5.7.1'],
      ['rate_limited_block', 429, 451, '4.7.1'],
      ['some_future_outage', 503, 451, '4.3.0'],
    ];
    for (const [code, status, smtp, enhanced] of table) {
      expect(replyFor(fail(code, status, 'm'), 'MAIL'), code).to.deep.include({ code: smtp, enhanced });
    }
    expect(replyFor(new Error('down'), 'MAIL')).to.deep.include({ code: 451, enhanced: '4.3.0' });
  });

  it('at RCPT TO a permanent refusal of the recipient is 550 5.7.1 (RFC 5321 4.3.2), temporary ones stay 451', () => {
    const table: Array<[string, number, number, string]> = [
      ['sandbox_recipient_not_allowed', 403, 550, '5.7.1'],
      ['recipient_not_permitted', 403, 550, '5.7.1'],
      ['some_future_refusal', 403, 550, '5.7.1'],
      ['some_future_outage', 503, 451, '4.3.0'],
    ];
    for (const [code, status, smtp, enhanced] of table) {
      expect(replyFor(fail(code, status, 'm'), 'RCPT'), code).to.deep.include({ code: smtp, enhanced });
    }
    expect(replyFor(new Error('down'), 'RCPT')).to.deep.include({ code: 451, enhanced: '4.3.0' });
  });

  it('anything else (store down, a bug) is a temporary 451 4.3.0 without internals', () => {
    const r = replyFor(new Error('connection refused 10.0.0.3:5432'));
    expect(r).to.deep.include({ code: 451, enhanced: '4.3.0' });
    expect(r.text).to.not.include('10.0.0.3');
  });

  it('content the event store can never keep is a permanent 554 5.6.0, not a 451 the client would retry forever', () => {
    const r = replyFor(new InvalidEventDataError('message-1', 'MessageAccepted', 'U+0000 in a string'));
    expect(r).to.deep.include({ code: 554, enhanced: '5.6.0' });
    expect(r.text).to.not.include('message-1');
  });

  it('reply text is one line', () => {
    expect(replyFor(fail('validation_error', 422, 'a\r\nb')).text).to.equal('a b');
  });
});

describe('smtp/authLimiter gate (unit)', () => {
  const s = DEFAULT_AUTH_LIMITS;
  it('no delay under the free failures, then doubling up to the cap, lockout by address only', () => {
    expect(gateFor(0, 0, -2, s)).to.deep.equal({ kind: 'open', delayMs: 0 });
    expect(gateFor(2, 2, 900, s)).to.deep.equal({ kind: 'open', delayMs: 0 });
    expect(gateFor(3, 0, 900, s)).to.deep.equal({ kind: 'open', delayMs: 250 });
    expect(gateFor(0, 4, 900, s)).to.deep.equal({ kind: 'open', delayMs: 500 });
    expect(gateFor(10, 0, 900, s)).to.deep.equal({ kind: 'open', delayMs: 5000 });
    expect(gateFor(0, 1000, 900, s)).to.deep.equal({ kind: 'open', delayMs: 5000 });
    expect(gateFor(20, 0, 600, s)).to.deep.equal({ kind: 'locked', retryAfterSeconds: 600 });
  });
});

describe('smtp/server KnownClients (unit)', () => {
  it('remembers an address for its lifetime, bounded in size', () => {
    let t = 0;
    const k = new KnownClients(1000, 2, () => t);
    k.remember('10.0.0.1');
    expect(k.knows('10.0.0.1')).to.equal(true);
    t = 1001;
    expect(k.knows('10.0.0.1')).to.equal(false);
    k.remember('a');
    k.remember('b');
    k.remember('c');
    expect([k.knows('a'), k.knows('b'), k.knows('c')]).to.deep.equal([false, true, true]);
  });
});
