import { expect } from 'chai';
import { DomainError } from '../../domain/errors.js';
import { parseLogQuery, parseStatusFilter, outcomesOf } from '../../projections/messages/logQuery.js';
import { decodeCursor, encodeCursor } from '../../projections/messages/queries.js';
import { maskEmail, maskEmailsInText } from '../../projections/messages/pii.js';

const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (e) {
    return e instanceof DomainError ? `${e.code}/${e.status}` : 'not a DomainError';
  }
  return undefined;
};

describe('log query syntax', () => {
  it('empty query = no filter', () => {
    expect(parseLogQuery('')).to.deep.equal({ recipients: [], domains: [], statuses: [], metadata: [] });
    expect(parseLogQuery(null)).to.deep.equal({ recipients: [], domains: [], statuses: [], metadata: [] });
    expect(parseLogQuery('   ')).to.deep.equal({ recipients: [], domains: [], statuses: [], metadata: [] });
  });

  it('parses every term kind, ANDed', () => {
    expect(parseLogQuery('recipient:Jane@Example.COM domain:Gmail.com status:bounced metadata.orderId:42 metadata.tier:gold')).to.deep.equal({
      recipients: ['Jane@example.com'],
      domains: ['gmail.com'],
      statuses: ['bounced'],
      metadata: [{ key: 'orderId', value: '42' }, { key: 'tier', value: 'gold' }],
    });
  });

  it('accepts quoted values with escapes and several terms of one kind', () => {
    const q = parseLogQuery('metadata.note:"two words \\"quoted\\"" recipient:a@x.test recipient:b@y.test status:sent');
    expect(q.metadata).to.deep.equal([{ key: 'note', value: 'two words "quoted"' }]);
    expect(q.recipients).to.deep.equal(['a@x.test', 'b@y.test']);
    expect(q.statuses).to.deep.equal(['sent']);
  });

  it('keys are case-insensitive, metadata keys keep their case', () => {
    expect(parseLogQuery('Status:DELIVERED METADATA.Key:v')).to.deep.equal({ recipients: [], domains: [], statuses: ['delivered'], metadata: [{ key: 'Key', value: 'v' }] });
  });

  for (const bad of ['hello', 'recipient:jane', 'status:lost', 'color:red', 'domain:', 'metadata.:x', 'recipient:a@x.test free', 'metadata.k:"open', ':x', 'domain:a@b.c']) {
    it(`rejects ${JSON.stringify(bad)} with invalid_query/400`, () => {
      expect(codeOf(() => parseLogQuery(bad))).to.equal('invalid_query/400');
    });
  }

  it('sent means processed or later and not failed', () => {
    expect(outcomesOf('sent')).to.have.members(['processed', 'deferred', 'delivered', 'bounced', 'complained']);
    expect(outcomesOf(parseStatusFilter('queued'))).to.deep.equal(['queued']);
  });
});

describe('logs cursor', () => {
  it('round-trips (µs timestamps kept as text)', () => {
    const c = encodeCursor('2026-01-01T00:00:00.123456+00:00', '11111111-1111-4111-8111-111111111111');
    expect(c).to.match(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(c)).to.deep.equal({ queuedAt: '2026-01-01T00:00:00.123456+00:00', id: '11111111-1111-4111-8111-111111111111' });
  });
  it('rejects garbage with invalid_cursor/400', () => {
    expect(codeOf(() => decodeCursor('nope'))).to.equal('invalid_cursor/400');
    expect(codeOf(() => decodeCursor(Buffer.from('["x","y"]').toString('base64url')))).to.equal('invalid_cursor/400');
  });
  it('takes only times PostgreSQL takes back, whatever Date.parse accepts', () => {
    const id = '11111111-1111-4111-8111-111111111111';
    const cursor = (t: string) => encodeCursor(t, id);
    for (const t of ['0', '2026', '0000-01-01T00:00:00+00:00', '2026-02-30T00:00:00+00:00', '2026-11-24T10:00:00+23:59', '+275760-09-13T00:00:00Z', '2026-11-24T10:00:00Z']) {
      expect(codeOf(() => decodeCursor(cursor(t))), t).to.equal('invalid_cursor/400');
    }
    expect(decodeCursor(cursor('2026-11-24T10:00:00-05:30')).queuedAt).to.equal('2026-11-24T10:00:00-05:30');
  });
});

describe('maskEmail', () => {
  it('keeps the first letters and the TLD', () => {
    expect(maskEmail('john.doe@example.com')).to.equal('j***@e***.com');
    expect(maskEmail('a@mail.example.co.uk')).to.equal('a***@m***.uk');
    expect(maskEmail('x@localhost')).to.equal('x***@l***');
    expect(maskEmail('nobody')).to.equal('n***');
    expect(maskEmail('')).to.equal('');
  });
});

describe('maskEmailsInText', () => {
  it('masks every address a receiving server\'s reply quotes, and nothing else', () => {
    expect(maskEmailsInText('550 5.1.1 <john.doe@example.com>: Recipient address rejected: User unknown'))
      .to.equal('550 5.1.1 <j***@e***.com>: Recipient address rejected: User unknown');
    expect(maskEmailsInText('550 john.doe@example.com... User unknown')).to.equal('550 j***@e***.com... User unknown');
    expect(maskEmailsInText('450 4.2.0 "a@b.org", (c@d.net); [e@f.io]')).to.equal('450 4.2.0 "a***@b***.org", (c***@d***.net); [e***@f***.io]');
    expect(maskEmailsInText('250 2.0.0 Ok: queued as 4XyZ')).to.equal('250 2.0.0 Ok: queued as 4XyZ');
    expect(maskEmailsInText('')).to.equal('');
  });
});
