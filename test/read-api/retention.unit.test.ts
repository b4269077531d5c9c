import { expect } from 'chai';
import { parseIsoTimestamp, retentionRange, RETENTION_GRACE_MS } from '../../read-api/http/retention';
import { DomainError } from '../../domain/errors';

describe('retention window (unit)', () => {
  const now = new Date('2026-11-22T12:00:00.000Z');
  const windowStart = new Date('2026-10-23T12:00:00.000Z');
  const codeOf = (fn: () => unknown): string | null => {
    try { fn(); return null; } catch (e) { expect(e).to.be.instanceOf(DomainError); return (e as DomainError).code; }
  };

  it('parses ISO 8601 dates and date-times; offsets honoured, no offset = UTC', () => {
    expect(parseIsoTimestamp('2026-11-22')?.toISOString()).to.equal('2026-11-22T00:00:00.000Z');
    expect(parseIsoTimestamp('2026-11-22T10:00:00Z')?.toISOString()).to.equal('2026-11-22T10:00:00.000Z');
    expect(parseIsoTimestamp('2026-11-22T10:00:00.123456+02:00')?.toISOString()).to.equal('2026-11-22T08:00:00.123Z');
    expect(parseIsoTimestamp('2026-11-22T10:00-0130')?.toISOString()).to.equal('2026-11-22T11:30:00.000Z');
    expect(parseIsoTimestamp('2026-11-22T10:00:00')?.toISOString()).to.equal('2026-11-22T10:00:00.000Z');
    for (const bad of ['', 'yesterday', '1700000000', '2026-02-30', '2026-13-01', '2026-11-22T25:00:00Z', 'Sun Nov 22 2026', '2026/11/22', '2026-11-22T10:00:00+2']) {
      expect(parseIsoTimestamp(bad), bad).to.equal(null);
    }
  });

  it('defaults from to the window start and keeps what is inside', () => {
    expect(retentionRange({}, 30, now)).to.deep.equal({ from: windowStart, to: null });
    const r = retentionRange({ from: '2026-11-01T00:00:00Z', to: '2026-11-02T00:00:00Z' }, 30, now);
    expect(r).to.deep.equal({ from: new Date('2026-11-01T00:00:00Z'), to: new Date('2026-11-02T00:00:00Z') });
  });

  it('refuses from/to older than the window (beyond the grace) with outside_retention_window', () => {
    const old = new Date(windowStart.getTime() - RETENTION_GRACE_MS - 1).toISOString();
    expect(codeOf(() => retentionRange({ from: old }, 30, now))).to.equal('outside_retention_window');
    expect(codeOf(() => retentionRange({ to: old }, 30, now))).to.equal('outside_retention_window');
    expect(codeOf(() => retentionRange({ from: '2026-10-23' }, 30, now))).to.equal('outside_retention_window');
    const edge = new Date(windowStart.getTime() - RETENTION_GRACE_MS).toISOString();
    expect(retentionRange({ from: edge }, 30, now).from).to.deep.equal(windowStart);
    // A `to` in the grace is the window's start too: never a range that ends before it starts.
    expect(retentionRange({ to: edge }, 30, now)).to.deep.equal({ from: windowStart, to: windowStart });
    const inGrace = new Date(windowStart.getTime() - 60_000).toISOString();
    expect(retentionRange({ from: edge, to: inGrace }, 30, now)).to.deep.equal({ from: windowStart, to: windowStart });
    expect(codeOf(() => retentionRange({ from: '2026-11-01T00:00:00Z' }, 7, now))).to.equal('outside_retention_window');
  });

  it('a from or to after now counts as now (nothing exists later)', () => {
    expect(retentionRange({ to: '9999-12-31T23:59:59.999Z' }, 30, now)).to.deep.equal({ from: windowStart, to: now });
    expect(retentionRange({ from: '2026-11-22T11:00:00Z', to: '2027-01-01' }, 30, now)).to.deep.equal({ from: new Date('2026-11-22T11:00:00Z'), to: now });
    expect(retentionRange({ from: '9999-12-31T23:59:59Z' }, 30, now)).to.deep.equal({ from: now, to: null });
    expect(retentionRange({ from: '9999-01-01', to: '9999-12-31' }, 30, now)).to.deep.equal({ from: now, to: now });
  });

  it('invalid_query for a malformed time or from after to', () => {
    expect(codeOf(() => retentionRange({ from: 'soon' }, 30, now))).to.equal('invalid_query');
    expect(codeOf(() => retentionRange({ to: '2026-11-31' }, 30, now))).to.equal('invalid_query');
    expect(codeOf(() => retentionRange({ from: '2026-11-10T00:00:00Z', to: '2026-11-09T00:00:00Z' }, 30, now))).to.equal('invalid_query');
  });
});
