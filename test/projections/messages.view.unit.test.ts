import { expect } from 'chai';
import {
  collapseOutcome, compareTimeline, evolveMessageView, foldMessageView, messageTimelineOf, timelineEntryOf, type MessageEventInput, type Outcome, type TimelineEntry,
} from '../../projections/messages/view.js';

const MID = '11111111-1111-4111-8111-111111111111';
const BLOCK = '22222222-2222-4222-8222-222222222222';
const ACCOUNT = '33333333-3333-4333-8333-333333333333';
const t = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();

let seq = 0;
const ev = (type: string, data: Record<string, unknown>): MessageEventInput & { id: string } => ({ id: `e${++seq}`, type, data: { messageId: MID, ...data } });
const accepted = (to: string[], at = 0) =>
  ev('MessageAccepted', {
    motorBlockId: BLOCK, accountId: ACCOUNT, domainId: null, from: 'app@sender.test', fromName: 'App', to, subject: 'Hi',
    text: 'x', html: null, headers: {}, smtpMessageId: '<abc@sender.test>', idempotencyKey: null, source: 'http', metadata: { order: '42' }, acceptedAt: t(at),
  });
const started = (recipient: string, at: number, attempt = 1) => ev('DeliveryStarted', { recipient, at: t(at), attempt });
const delivered = (recipient: string, at: number, code = '250') => ev('DeliverySucceeded', { recipient, at: t(at), attempt: 1, smtpCode: code, smtpResponse: `${code} ok`, enhancedCode: '2.0.0', mx: 'mx.rcpt.test' });
const deferred = (recipient: string, at: number, next = at + 60) => ev('DeliveryDeferred', { recipient, at: t(at), attempt: 1, smtpCode: '451', smtpResponse: '451 later', nextAttemptAt: t(next) });
const bounced = (recipient: string, at: number) => ev('DeliveryBounced', { recipient, at: t(at), attempt: 1, smtpCode: '550', smtpResponse: '550 no such user', enhancedCode: '5.1.1' });
const failed = (recipient: string, at: number) => ev('DeliveryFailed', { recipient, at: t(at), attempt: 3, smtpCode: null, smtpResponse: null, reason: 'no_mx' });
const complained = (recipient: string, at: number) => ev('ComplaintReceived', { recipient, at: t(at), feedbackType: 'abuse' });

const outcome = (events: MessageEventInput[]) => foldMessageView(events)!.currentOutcome;

describe('messages view (pure reducer)', () => {
  it('starts queued with the accepted fields, Message-ID stored without angle brackets', () => {
    const v = foldMessageView([accepted(['A@Rcpt.Test'])])!;
    expect(v.currentOutcome).to.equal('queued');
    expect(v.isTerminal).to.equal(false);
    expect(v.smtpMessageId).to.equal('abc@sender.test');
    expect(v.recipients).to.deep.equal(['A@rcpt.test']);
    expect(v.recipientDomains).to.deep.equal(['rcpt.test']);
    expect(v.expectedCount).to.equal(1);
    expect(v.queuedAt.toISOString()).to.equal(t(0));
    expect(v.metadata).to.deep.equal({ order: '42' });
  });

  describe('content bytes (for the delivery sweeper)', () => {
    const acceptedWith = (data: Record<string, unknown>) => {
      const e = accepted(['a@r.test']);
      return { ...e, data: { ...(e.data as object), ...data } };
    };
    it('takes MessageAccepted.contentBytes', () => {
      expect(foldMessageView([acceptedWith({ contentBytes: 12_345 })])!.contentBytes).to.equal(12_345);
    });
    it('counts the content of an acceptance older than the field, as the delivery worker does', () => {
      const v = foldMessageView([acceptedWith({ text: 'héllo', html: '<p>x</p>', raw: 'R', headers: { 'X-A': 'b' } })])!;
      expect(v.contentBytes).to.equal(6 + 8 + 1 + 4);
    });
    it('is null when the content was left out (a live subscription, large event) and the field is absent, never a size counted from nothing', () => {
      const left = acceptedWith({});
      for (const key of ['text', 'html', 'raw', 'headers']) delete (left.data as Record<string, unknown>)[key];
      expect(foldMessageView([left])!.contentBytes).to.equal(null);
      // A size known before is kept.
      expect(foldMessageView([acceptedWith({ contentBytes: 7 }), left])!.contentBytes).to.equal(7);
    });
    it('is null before the acceptance', () => {
      expect(foldMessageView([started('a@r.test', 1)])!.contentBytes).to.equal(null);
    });
  });

  it('single recipient: queued → processed → deferred → processed → delivered with first-reached timestamps', () => {
    const events = [accepted(['a@r.test']), started('a@r.test', 1), deferred('a@r.test', 2), started('a@r.test', 62, 2), delivered('a@r.test', 63)];
    const steps: Outcome[] = [];
    let v = null;
    for (const e of events) {
      v = evolveMessageView(v, e);
      steps.push(v!.currentOutcome);
    }
    expect(steps).to.deep.equal(['queued', 'processed', 'deferred', 'processed', 'delivered']);
    expect(v!.isTerminal).to.equal(true);
    expect(v!.processedAt!.toISOString()).to.equal(t(1));
    expect(v!.deliveredAt!.toISOString()).to.equal(t(63));
    expect(v!.smtpCode).to.equal('250');
    expect(v!.recipientStates[0].attempts).to.equal(2);
    expect(v!.recipientStates[0].nextAttemptAt).to.equal(null);
  });

  it('deferred recipient carries nextAttemptAt', () => {
    const v = foldMessageView([accepted(['a@r.test']), started('a@r.test', 1), deferred('a@r.test', 2, 300)])!;
    expect(v.recipientStates[0].nextAttemptAt!.toISOString()).to.equal(t(300));
    expect(v.smtpCode).to.equal('451');
  });

  describe('multi-recipient collapse', () => {
    const to = ['a@x.test', 'b@y.test', 'c@y.test'];
    it('shows the least advanced in-flight state while any recipient is in flight', () => {
      expect(outcome([accepted(to), started('a@x.test', 1), delivered('a@x.test', 2)])).to.equal('queued');
      expect(outcome([accepted(to), started('a@x.test', 1), started('b@y.test', 1), started('c@y.test', 1), deferred('b@y.test', 2)])).to.equal('processed');
      const v = foldMessageView([accepted(to), ...to.map((r) => started(r, 1)), deferred('b@y.test', 2), delivered('a@x.test', 2), bounced('c@y.test', 2)])!;
      expect(v.currentOutcome).to.equal('deferred');
      expect(v.isTerminal).to.equal(false);
      expect(v.recipientDomains).to.deep.equal(['x.test', 'y.test']);
    });
    it('all terminal: complained > all delivered > any bounced > failed', () => {
      const base = [accepted(to), ...to.map((r) => started(r, 1))];
      expect(outcome([...base, delivered('a@x.test', 2), delivered('b@y.test', 2), delivered('c@y.test', 2)])).to.equal('delivered');
      expect(outcome([...base, delivered('a@x.test', 2), bounced('b@y.test', 2), failed('c@y.test', 2)])).to.equal('bounced');
      expect(outcome([...base, delivered('a@x.test', 2), failed('b@y.test', 2), delivered('c@y.test', 2)])).to.equal('failed');
      expect(outcome([...base, delivered('a@x.test', 2), bounced('b@y.test', 2), failed('c@y.test', 2), complained('a@x.test', 9)])).to.equal('complained');
    });
    it('isTerminal only once every recipient is terminal; deliveredAt/bouncedAt are the first ones', () => {
      const v = foldMessageView([accepted(to), ...to.map((r) => started(r, 1)), delivered('a@x.test', 5), delivered('b@y.test', 3), bounced('c@y.test', 4)])!;
      expect(v.isTerminal).to.equal(true);
      expect(v.deliveredAt!.toISOString()).to.equal(t(3));
      expect(v.bouncedAt!.toISOString()).to.equal(t(4));
      expect(v.smtpCode).to.equal('250'); // the latest reply (a@ at t5)
    });
    it('collapseOutcome of nothing is queued', () => {
      expect(collapseOutcome([])).to.deep.equal({ outcome: 'queued', isTerminal: false });
    });
    it('duplicate addresses in `to` count once', () => {
      const v = foldMessageView([accepted(['a@x.test', 'a@X.TEST'])])!;
      expect(v.expectedCount).to.equal(1);
    });
  });

  describe('late and out-of-order events', () => {
    it('an older in-flight event never regresses a terminal outcome', () => {
      const v = foldMessageView([accepted(['a@r.test']), delivered('a@r.test', 10), deferred('a@r.test', 5), started('a@r.test', 4)])!;
      expect(v.currentOutcome).to.equal('delivered');
      expect(v.isTerminal).to.equal(true);
      expect(v.smtpCode).to.equal('250');
      expect(v.processedAt!.toISOString()).to.equal(t(4));
    });
    it('an older in-flight event does not override a newer in-flight one', () => {
      expect(outcome([accepted(['a@r.test']), started('a@r.test', 10, 2), deferred('a@r.test', 5)])).to.equal('processed');
    });
    it('a complaint after delivered wins, and nothing after a complaint changes it', () => {
      expect(outcome([accepted(['a@r.test']), delivered('a@r.test', 10), complained('a@r.test', 100)])).to.equal('complained');
      expect(outcome([accepted(['a@r.test']), complained('a@r.test', 100), delivered('a@r.test', 10), bounced('a@r.test', 200)])).to.equal('complained');
    });
    it('an asynchronous bounce (a DSN received after delivered) wins over the delivery, in any order', () => {
      const late = ev('DeliveryBounced', { recipient: 'a@r.test', at: t(300), attempt: 1, smtpCode: '550', smtpResponse: '550 5.1.1 gone', enhancedCode: '5.1.1', asynchronous: true });
      expect(outcome([accepted(['a@r.test']), delivered('a@r.test', 10), late])).to.equal('bounced');
      expect(outcome([accepted(['a@r.test']), late, delivered('a@r.test', 10)])).to.equal('bounced');
    });
    it('any order of the same events gives the same view', () => {
      const events = [started('a@r.test', 1), deferred('a@r.test', 2), started('a@r.test', 62, 2), delivered('a@r.test', 63), started('b@s.test', 1), bounced('b@s.test', 3)];
      const reference = foldMessageView([accepted(['a@r.test', 'b@s.test']), ...events]);
      for (let i = 0; i < 20; i++) {
        const shuffled = [...events].sort(() => Math.random() - 0.5);
        expect(foldMessageView([accepted(['a@r.test', 'b@s.test']), ...shuffled])).to.deep.equal(reference);
      }
    });
    it('a delivery event before acceptance creates a placeholder that acceptance completes', () => {
      const v = foldMessageView([started('a@r.test', 1), accepted(['a@r.test'])])!;
      expect(v.accepted).to.equal(true);
      expect(v.currentOutcome).to.equal('processed');
      expect(v.from).to.equal('app@sender.test');
    });
  });

  describe('idempotency', () => {
    it('applying any event twice changes nothing', () => {
      const events = [accepted(['a@r.test', 'b@s.test']), started('a@r.test', 1), deferred('a@r.test', 2), started('b@s.test', 1), delivered('b@s.test', 3), complained('b@s.test', 9)];
      const once = foldMessageView(events);
      const twice = foldMessageView(events.flatMap((e) => [e, e]));
      const replayed = foldMessageView([...events, ...events]);
      expect(twice).to.deep.equal(once);
      expect(replayed).to.deep.equal(once);
    });
    it('ignores other event types and other messages', () => {
      const v = foldMessageView([accepted(['a@r.test'])]);
      expect(evolveMessageView(v, { type: 'AccountCreated', data: {} })).to.equal(v);
      expect(evolveMessageView(v, { type: 'DeliveryStarted', data: { messageId: 'other', recipient: 'a@r.test', at: t(1), attempt: 1 } })).to.equal(v);
      expect(evolveMessageView(null, { type: 'Whatever', data: null })).to.equal(null);
    });
  });

  it('timeline entries carry outcome, reply and details', () => {
    const e = bounced('A@R.test', 3);
    const entry = timelineEntryOf({ ...e, revision: 4n })!;
    expect(entry).to.include({ eventId: e.id, messageId: MID, recipient: 'A@r.test', type: 'DeliveryBounced', outcome: 'bounced', smtpCode: '550', enhancedCode: '5.1.1' });
    expect(entry.revision).to.equal(4n);
    expect(timelineEntryOf({ id: 'x', type: 'AccountCreated', data: {} })).to.equal(null);
  });

  describe('message timeline (one row per step of the collapsed outcome)', () => {
    const perEvent = (events: Array<MessageEventInput & { id: string }>): TimelineEntry[] =>
      events.map((e, i) => timelineEntryOf({ ...e, revision: BigInt(i) })!).sort(compareTimeline);
    const withRevisions = (events: Array<MessageEventInput & { id: string }>) => events.map((e, i) => ({ ...e, revision: BigInt(i) }));
    const rows = (events: Array<MessageEventInput & { id: string }>) => messageTimelineOf(withRevisions(events));
    const brief = (r: TimelineEntry) => [r.outcome, r.type, r.eventId, r.at.toISOString(), r.recipient, r.smtpCode];
    const deferredN = (recipient: string, at: number, attempt: number) =>
      ev('DeliveryDeferred', { recipient, at: t(at), attempt, smtpCode: '451', smtpResponse: `451 later ${attempt}`, nextAttemptAt: t(at + 60) });

    it('a single recipient comes out event for event, as the per-event timeline did (two deferrals, retries between)', () => {
      const events = [
        accepted(['A@R.test']), started('A@R.test', 1), deferredN('A@R.test', 2, 1), started('A@R.test', 62, 2), deferredN('A@R.test', 63, 2),
        started('A@R.test', 123, 3), delivered('A@R.test', 124), complained('A@R.test', 500),
      ];
      const got = rows(events);
      expect(got).to.deep.equal(perEvent(events));
      expect(got.map((r) => r.outcome)).to.deep.equal(['queued', 'processed', 'deferred', 'processed', 'deferred', 'processed', 'delivered', 'complained']);
      expect(got.map((r) => r.recipient)).to.deep.equal([null, ...Array(7).fill('A@r.test')]);
    });

    it('a single recipient whose attempt was lost in flight and taken again keeps both processed rows', () => {
      const events = [accepted(['a@r.test']), started('a@r.test', 1, 1), started('a@r.test', 700, 2), delivered('a@r.test', 701)];
      expect(rows(events)).to.deep.equal(perEvent(events));
      expect(rows(events).map((r) => [r.outcome, r.attempt])).to.deep.equal([['queued', null], ['processed', 1], ['processed', 2], ['delivered', 1]]);
    });

    it('two recipients, one bounced then the other delivered: queued → processed → bounced, the last row at the delivery with the bounce\'s type and reply', () => {
      const events = [accepted(['one@r.test', 'two@s.test']), started('one@r.test', 1), started('two@s.test', 1), bounced('one@r.test', 2), delivered('two@s.test', 3)];
      const got = rows(events);
      expect(got.map(brief)).to.deep.equal([
        ['queued', 'MessageAccepted', events[0].id, t(0), null, null],
        ['processed', 'DeliveryStarted', events[2].id, t(1), 'one@r.test', null],
        ['bounced', 'DeliveryBounced', events[4].id, t(3), 'one@r.test', '550'],
      ]);
      expect(got[2]).to.include({ enhancedCode: '5.1.1', smtpResponse: '550 no such user', attempt: 1 });
    });

    it('two recipients, one delivered then the other bounced: the bounce itself is the last row', () => {
      const events = [accepted(['one@r.test', 'two@s.test']), started('one@r.test', 1), started('two@s.test', 1), delivered('one@r.test', 2), bounced('two@s.test', 3)];
      expect(rows(events).map(brief)).to.deep.equal([
        ['queued', 'MessageAccepted', events[0].id, t(0), null, null],
        ['processed', 'DeliveryStarted', events[2].id, t(1), 'one@r.test', null],
        ['bounced', 'DeliveryBounced', events[4].id, t(3), 'one@r.test', '550'],
      ]);
    });

    it('two recipients, one deferred while the other is delivered, then retried and delivered', () => {
      const events = [
        accepted(['one@r.test', 'two@s.test']), started('one@r.test', 1), started('two@s.test', 1), deferredN('one@r.test', 2, 1), delivered('two@s.test', 3),
        started('one@r.test', 62, 2), delivered('one@r.test', 63),
      ];
      const got = rows(events);
      expect(got.map(brief)).to.deep.equal([
        ['queued', 'MessageAccepted', events[0].id, t(0), null, null],
        ['processed', 'DeliveryStarted', events[2].id, t(1), 'one@r.test', null],
        ['deferred', 'DeliveryDeferred', events[4].id, t(3), 'one@r.test', '451'],
        ['processed', 'DeliveryStarted', events[5].id, t(62), 'one@r.test', null],
        ['delivered', 'DeliverySucceeded', events[6].id, t(63), 'one@r.test', '250'],
      ]);
      expect(got[2].nextAttemptAt!.toISOString()).to.equal(t(62));
      expect(got[3].attempt).to.equal(2);
    });

    it('a retry round of several recipients is one processed row', () => {
      const to = ['a@x.test', 'b@y.test', 'c@y.test'];
      const events = [accepted(to), ...to.map((r) => started(r, 1)), ...to.map((r) => deferredN(r, 2, 1)), ...to.map((r) => started(r, 62, 2)), ...to.map((r) => delivered(r, 63))];
      expect(rows(events).map((r) => [r.outcome, r.eventId])).to.deep.equal([
        ['queued', events[0].id], ['processed', events[3].id], ['deferred', events[6].id], ['processed', events[7].id], ['delivered', events[12].id],
      ]);
    });

    it('a complaint after both were delivered: queued → processed → delivered → complained', () => {
      const events = [
        accepted(['one@r.test', 'two@s.test']), started('one@r.test', 1), started('two@s.test', 1), delivered('one@r.test', 2), delivered('two@s.test', 3),
        complained('one@r.test', 100),
      ];
      expect(rows(events).map(brief)).to.deep.equal([
        ['queued', 'MessageAccepted', events[0].id, t(0), null, null],
        ['processed', 'DeliveryStarted', events[2].id, t(1), 'one@r.test', null],
        ['delivered', 'DeliverySucceeded', events[4].id, t(3), 'one@r.test', '250'],
        ['complained', 'ComplaintReceived', events[5].id, t(100), 'one@r.test', null],
      ]);
    });

    it('its last row is the outcome of the message view, whatever order the events were logged in', () => {
      const events = [started('a@r.test', 1), deferred('a@r.test', 2), started('a@r.test', 62, 2), delivered('a@r.test', 63), started('b@s.test', 1), bounced('b@s.test', 3)];
      for (let i = 0; i < 20; i++) {
        const shuffled = [accepted(['a@r.test', 'b@s.test']), ...[...events].sort(() => Math.random() - 0.5)];
        const got = rows(shuffled);
        expect(got.map((r) => r.outcome)).to.deep.equal(['queued', 'processed', 'deferred', 'processed', 'bounced']);
        expect(got[got.length - 1].outcome).to.equal(foldMessageView(shuffled)!.currentOutcome);
      }
    });
  });
});
