import { expect } from 'chai';
import { collapseOutcome, evolveMessageView, foldMessageView, timelineEntryOf, type MessageEventInput, type Outcome } from '../../projections/messages/view.js';

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
});
