import { expect } from 'chai';
import { addContributions, applyStatEvent, contributions, type Contribution, type RecipientStat } from '../../projections/analytics/state';

const M = '11111111-1111-4111-8111-111111111111';
const B = '22222222-2222-4222-8222-222222222222';
const accepted = (to: string[], at: string) => ({ type: 'MessageAccepted', data: { messageId: M, motorBlockId: B, accountId: B, to, acceptedAt: at } });
const outcome = (type: string, recipient: string, at: string, extra: Record<string, unknown> = {}) => ({ type, data: { messageId: M, recipient, at, attempt: 1, ...extra } });

function fold(events: Array<{ type: string; data: unknown }>): Map<string, RecipientStat> {
  const states = new Map<string, RecipientStat>();
  for (const e of events) applyStatEvent(states, e);
  return states;
}
function rollup(states: Map<string, RecipientStat>): Record<string, Record<string, number>> {
  const acc = new Map<string, Contribution>();
  for (const s of states.values()) addContributions(acc, contributions(s), 1);
  const out: Record<string, Record<string, number>> = {};
  for (const [k, c] of acc) out[k] = c.counters as Record<string, number>;
  return out;
}

describe('analytics recipient fold (unit)', () => {
  const events = [
    accepted(['a@Gmail.com', 'b@corp.test', 'a@gmail.com'], '2026-03-14T23:59:30Z'),
    outcome('DeliveryStarted', 'a@gmail.com', '2026-03-15T00:00:01Z'),
    outcome('DeliverySucceeded', 'a@gmail.com', '2026-03-15T00:00:10Z', { smtpCode: '250', smtpResponse: 'ok', mx: 'gmail-smtp-in.l.google.com' }),
    outcome('DeliveryBounced', 'b@corp.test', '2026-03-15T00:30:00Z', { smtpCode: '550', smtpResponse: 'no', enhancedCode: '5.1.1', mx: 'ASPMX.L.GOOGLE.COM' }),
    outcome('DeliveryDeferred', 'b@corp.test', '2026-03-15T00:01:00Z', { smtpCode: '451', smtpResponse: 'later', enhancedCode: '4.7.1', mx: 'aspmx.l.google.com', nextAttemptAt: '2026-03-15T00:10:00Z' }),
    outcome('ComplaintReceived', 'a@gmail.com', '2026-03-15T02:00:00Z', { feedbackType: 'abuse' }),
  ];

  it('dedupes recipients, keeps the terminal outcome against a late deferral, lets a complaint win', () => {
    const s = [...fold(events).values()];
    expect(s.map((x) => [x.recipient, x.ordinal, x.outcome, x.smtpCode, x.enhancedCode, x.mx])).to.deep.equal([
      ['a@gmail.com', 0, 'complained', '250', null, 'gmail-smtp-in.l.google.com'],
      ['b@corp.test', 1, 'bounced', '550', '5.1.1', 'aspmx.l.google.com'],
    ]);
  });

  it('an asynchronous bounce makes a delivered recipient bounced with its reply, and leaves the provider to the MX that took the message', () => {
    const s = [...fold([
      accepted(['c@corp.test'], '2026-03-14T23:59:30Z'),
      outcome('DeliverySucceeded', 'c@corp.test', '2026-03-15T00:00:10Z', { smtpCode: '250', smtpResponse: 'ok', mx: 'corp-test.mail.protection.outlook.com' }),
      outcome('DeliveryBounced', 'c@corp.test', '2026-03-15T01:00:00Z', { smtpCode: '550', smtpResponse: 'mailbox full', enhancedCode: '5.2.2', mx: 'relay.internal.corp.test', asynchronous: true }),
    ]).values()];
    expect(s.map((x) => [x.outcome, x.smtpCode, x.enhancedCode, x.mx])).to.deep.equal([['bounced', '550', '5.2.2', 'corp-test.mail.protection.outlook.com']]);
  });

  it('gives the same rollup in any order and with duplicated events', () => {
    const expected = rollup(fold(events));
    expect(expected['block_hourly|' + [B, '2026-03-14T23:00:00.000Z'].join('\u0000')]).to.deep.equal({ total: 2, complained: 1, bounced: 1, messages: 1 });
    expect(expected['domain_daily|' + [B, '2026-03-14T00:00:00.000Z', 'corp.test', 'gmail'].join('\u0000')]).to.deep.equal({ total: 1, bounced: 1 });
    expect(expected['code_hourly|' + [B, '2026-03-14T23:00:00.000Z', '550', '5.1.1', 'bounced'].join('\u0000')]).to.deep.equal({ count: 1 });
    const reversed = [events[0], ...events.slice(1).reverse()];
    expect(rollup(fold(reversed))).to.deep.equal(expected);
    expect(rollup(fold([...events, ...events.slice(2)]))).to.deep.equal(expected);
    // Outcomes seen before the acceptance (other log order) contribute once accepted.
    expect(rollup(fold([...events.slice(1), events[0]]))).to.deep.equal(expected);
  });

  it('a transition moves the unit: contributions(new) − contributions(old) nets to zero for unchanged keys', () => {
    const states = fold(events.slice(0, 2));
    const before = new Map(states);
    for (const e of events.slice(2)) applyStatEvent(states, e);
    const acc = new Map<string, Contribution>();
    for (const [k, s] of states) {
      addContributions(acc, contributions(before.get(k)), -1);
      addContributions(acc, contributions(s), 1);
    }
    const hour = acc.get('block_hourly|' + [B, '2026-03-14T23:00:00.000Z'].join('\u0000'))!;
    expect(hour.counters).to.deep.equal({ total: 0, complained: 1, bounced: 1, messages: 0 });
    // b@corp.test moved from provider "other" (by name) to "gmail" (by MX).
    expect(acc.get('domain_hourly|' + [B, '2026-03-14T23:00:00.000Z', 'corp.test', 'other'].join('\u0000'))!.counters).to.deep.equal({ total: -1 });
    expect(acc.get('domain_hourly|' + [B, '2026-03-14T23:00:00.000Z', 'corp.test', 'gmail'].join('\u0000'))!.counters).to.deep.equal({ total: 1, bounced: 1 });
  });

  it('ignores malformed and foreign events', () => {
    const states = fold([
      { type: 'MessageAccepted', data: { messageId: M } },
      { type: 'DeliverySucceeded', data: { messageId: M, recipient: 'x@y.test', at: 'nope' } },
      { type: 'AccountCreated', data: { messageId: M } },
    ]);
    expect(states.size).to.equal(0);
  });
});
