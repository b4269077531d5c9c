import { expect } from 'chai';
import { isDomainError } from '../../domain/errors';
import {
  acceptMessage, fold, initialMessageState, planDelivery, recordAttempt, recipientOutcomeFacts, startDelivery, IN_FLIGHT_STALE_MS,
  type AttemptResult, type MessageEvent, type MessageState,
} from '../../domain/message/message';
import { recordBounceReport, recordComplaint } from '../../domain/message/reports';
import { validateSendRequest } from '../../domain/message/sendRules';

const T0 = new Date('2026-11-22T10:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const request = validateSendRequest({ from: 'app@example.com', to: ['a@x.org', 'b@y.org'], subject: 'Hi', text: 'Hello' });
const accepted = acceptMessage(initialMessageState(), {
  messageId: '3f1e2d4c-5b6a-4978-8a9b-0c1d2e3f4a5b', request, motorBlockId: 'b', accountId: 'acct', domainId: 'd',
  smtpMessageId: 'm@example.com', idempotencyKey: null, source: 'http', now: T0,
});

/** given(events) → state */
const given = (...events: MessageEvent[][]): MessageState => fold(events.flat());
const result = (recipient: string, outcome: AttemptResult['outcome'], smtpCode: string | null = null): AttemptResult =>
  ({ recipient, outcome, smtpCode, enhancedCode: null, smtpResponse: smtpCode ? `${smtpCode} reply` : null, mx: 'mx.test' });
const retry = () => 60;

describe('message aggregate (unit, given/when/then)', () => {
  it('AcceptMessage on no stream → MessageAccepted with every recipient queued', () => {
    expect(accepted).to.have.length(1);
    expect(accepted[0].data.to).to.deep.equal(['a@x.org', 'b@y.org']);
    const s = given(accepted);
    expect(s.status).to.equal('accepted');
    if (s.status === 'accepted') expect(Object.values(s.recipients).map((r) => r.outcome)).to.deep.equal(['queued', 'queued']);
  });

  it('MessageAccepted counts its content in UTF-8 bytes (text, html, raw, header names and values) for the delivery worker', () => {
    expect(accepted[0].data.contentBytes).to.equal(5);
    const rich = validateSendRequest({
      from: 'app@example.com', to: ['a@x.org'], subject: 'Hi', text: 'héllo', html: '<p>€</p>', headers: { 'X-Tag': 'ü' },
    });
    const [e] = acceptMessage(initialMessageState(), {
      messageId: 'x', request: rich, motorBlockId: 'b', accountId: 'a', domainId: 'd', smtpMessageId: 'm', idempotencyKey: null, source: 'smtp', raw: 'Subject: ñ\r\n\r\nhi', now: T0,
    });
    // 'héllo' 6 + '<p>€</p>' 10 + 'Subject: ñ\r\n\r\nhi' 17 + 'X-Tag' 5 + 'ü' 2
    expect(e.data.contentBytes).to.equal(6 + 10 + 17 + 5 + 2);
  });

  it('AcceptMessage on an existing message → message_exists', () => {
    try {
      acceptMessage(given(accepted), { messageId: 'x', request, motorBlockId: 'b', accountId: 'a', domainId: 'd', smtpMessageId: 'm', idempotencyKey: null, source: 'http', now: T0 });
      expect.fail('should throw');
    } catch (e) {
      expect(isDomainError(e) && e.code).to.equal('message_exists');
    }
  });

  it('StartDelivery → one DeliveryStarted per due recipient, attempt 1', () => {
    const started = startDelivery(given(accepted), { recipients: ['a@x.org', 'b@y.org'], now: at(1000) });
    expect(started.map((e) => [e.type, e.data.recipient, e.data.attempt])).to.deep.equal([['DeliveryStarted', 'a@x.org', 1], ['DeliveryStarted', 'b@y.org', 1]]);
  });

  it('RecordAttempt: 2xx → DeliverySucceeded, 5xx → DeliveryBounced, 4xx → DeliveryDeferred with nextAttemptAt', () => {
    const started = startDelivery(given(accepted), { recipients: ['a@x.org', 'b@y.org'], now: at(1000) });
    const out = recordAttempt(given(accepted, started), { results: [result('a@x.org', 'delivered', '250'), result('b@y.org', 'deferred', '450')], now: at(2000), lifetimeSeconds: 3600, retryDelaySeconds: retry });
    expect(out.map((e) => e.type)).to.deep.equal(['DeliverySucceeded', 'DeliveryDeferred']);
    expect(out[1].type === 'DeliveryDeferred' && out[1].data.nextAttemptAt).to.equal(at(62_000).toISOString());
    const bounced = recordAttempt(given(accepted, started), { results: [result('a@x.org', 'bounced', '550')], now: at(2000), lifetimeSeconds: 3600, retryDelaySeconds: retry });
    expect(bounced[0].type).to.equal('DeliveryBounced');
  });

  it('a DeliveryDeferred carries the message\'s contentBytes (counted from the content for an acceptance without it) for its retry job; the outcome facts leave it out', () => {
    const started = startDelivery(given(accepted), { recipients: ['a@x.org'], now: at(1000) });
    const deferral = (acceptance: MessageEvent[]) => {
      const [e] = recordAttempt(given(acceptance, started), { results: [result('a@x.org', 'deferred', '451')], now: at(2000), lifetimeSeconds: 3600, retryDelaySeconds: retry });
      expect(e.type).to.equal('DeliveryDeferred');
      return e;
    };
    const withSize = deferral([{ ...accepted[0], data: { ...accepted[0].data, contentBytes: 12_345 } }]);
    expect(withSize.type === 'DeliveryDeferred' && withSize.data.contentBytes).to.equal(12_345);
    const { contentBytes: _size, ...older } = accepted[0].data;
    const counted = deferral([{ ...accepted[0], data: older }]);
    expect(counted.type === 'DeliveryDeferred' && counted.data.contentBytes).to.equal(5);
    // Webhooks and the event stream tell these facts: the size is the worker's, not the user's.
    expect(recipientOutcomeFacts(withSize)).to.not.have.property('contentBytes');
  });

  it('a deferral near the end of the lifetime gets a last try at the deadline; past it → DeliveryFailed lifetime_exceeded', () => {
    const started = startDelivery(given(accepted), { recipients: ['a@x.org'], now: at(0) });
    const late = recordAttempt(given(accepted, started), { results: [result('a@x.org', 'deferred', '451')], now: at(50_000), lifetimeSeconds: 100, retryDelaySeconds: retry });
    expect(late[0].type === 'DeliveryDeferred' && late[0].data.nextAttemptAt).to.equal(at(100_000).toISOString());
    const out = recordAttempt(given(accepted, started), { results: [result('a@x.org', 'deferred', '451')], now: at(100_000), lifetimeSeconds: 100, retryDelaySeconds: retry });
    expect(out[0].type).to.equal('DeliveryFailed');
    expect(out[0].type === 'DeliveryFailed' && out[0].data.reason).to.equal('lifetime_exceeded');
  });

  it('terminal recipients get no further events; a complaint still supersedes delivered', () => {
    const started = startDelivery(given(accepted), { recipients: ['a@x.org'], now: at(0) });
    const done = recordAttempt(given(accepted, started), { results: [result('a@x.org', 'delivered', '250')], now: at(1), lifetimeSeconds: 100, retryDelaySeconds: retry });
    const s = given(accepted, started, done);
    expect(startDelivery(s, { recipients: ['a@x.org'], now: at(2) })).to.deep.equal([]);
    expect(recordAttempt(s, { results: [result('a@x.org', 'bounced', '550')], now: at(3), lifetimeSeconds: 100, retryDelaySeconds: retry })).to.deep.equal([]);
    const complained = fold([{ type: 'ComplaintReceived', data: { messageId: 'x', recipient: 'A@X.ORG', at: at(4).toISOString(), feedbackType: 'abuse' } }], s);
    expect(complained.status === 'accepted' && complained.recipients['a@x.org'].outcome).to.equal('complained');
  });

  it('an asynchronous bounce (a DSN) after delivered → bounced; one recorded during delivery is not taken after delivered', () => {
    const started = startDelivery(given(accepted), { recipients: ['a@x.org'], now: at(0) });
    const done = recordAttempt(given(accepted, started), { results: [result('a@x.org', 'delivered', '250')], now: at(1), lifetimeSeconds: 100, retryDelaySeconds: retry });
    const bounce = (asynchronous: boolean): MessageEvent => ({
      type: 'DeliveryBounced',
      data: { messageId: 'x', recipient: 'a@x.org', at: at(5).toISOString(), attempt: 1, smtpCode: '550', smtpResponse: '550 gone', ...(asynchronous ? { asynchronous: true as const } : {}) },
    });
    const late = given(accepted, started, done, [bounce(true)]);
    expect(late.status === 'accepted' && late.recipients['a@x.org']).to.include({ outcome: 'bounced', terminal: true });
    const sync = given(accepted, started, done, [bounce(false)]);
    expect(sync.status === 'accepted' && sync.recipients['a@x.org'].outcome).to.equal('delivered');
  });

  describe('reports received after delivery (domain/message/reports.ts)', () => {
    const delivered = () => {
      const started = startDelivery(given(accepted), { recipients: ['a@x.org', 'b@y.org'], now: at(0) });
      return given(accepted, started, recordAttempt(given(accepted, started), {
        results: [result('a@x.org', 'delivered', '250'), result('b@y.org', 'bounced', '550')], now: at(1), lifetimeSeconds: 100, retryDelaySeconds: retry,
      }));
    };
    const bounceCmd = (addresses: (string | null)[]) => ({ addresses, smtpCode: '550', enhancedCode: '5.1.1', smtpResponse: '550 5.1.1 gone', remoteMta: 'mx.x.org', now: at(9) });

    it('a DSN names a recipient (any case): DeliveryBounced, asynchronous, with the report\'s reply and the last attempt', () => {
      const v = recordBounceReport(delivered(), bounceCmd([null, 'A@X.ORG']));
      expect(v).to.deep.equal({
        kind: 'record',
        event: {
          type: 'DeliveryBounced',
          data: {
            messageId: accepted[0].data.messageId, recipient: 'a@x.org', at: at(9).toISOString(), attempt: 1,
            smtpCode: '550', smtpResponse: '550 5.1.1 gone', enhancedCode: '5.1.1', mx: 'mx.x.org', asynchronous: true,
          },
        },
      });
    });
    it('a DSN for an address not among the recipients, or one that already bounced: nothing', () => {
      expect(recordBounceReport(delivered(), bounceCmd(['c@x.org']))).to.deep.equal({ kind: 'ignore', reason: 'unknown_recipient' });
      expect(recordBounceReport(delivered(), bounceCmd(['b@y.org']))).to.deep.equal({ kind: 'ignore', reason: 'already_final' });
      expect(recordBounceReport(initialMessageState(), bounceCmd(['a@x.org']))).to.deep.equal({ kind: 'ignore', reason: 'no_message' });
    });
    it('a complaint: the Original-Rcpt-To recipient; none named and several recipients → nothing; a second one → nothing', () => {
      const s = delivered();
      const v = recordComplaint(s, { originalRcptTo: ['a@X.org'], feedbackType: 'abuse', now: at(9) });
      expect(v.kind === 'record' && v.event.data).to.deep.equal({ messageId: accepted[0].data.messageId, recipient: 'a@x.org', at: at(9).toISOString(), feedbackType: 'abuse' });
      expect(recordComplaint(s, { originalRcptTo: [], feedbackType: 'abuse', now: at(9) })).to.deep.equal({ kind: 'ignore', reason: 'ambiguous_recipient' });
      expect(recordComplaint(s, { originalRcptTo: ['a@x.org', 'b@y.org'], feedbackType: null, now: at(9) })).to.deep.equal({ kind: 'ignore', reason: 'ambiguous_recipient' });
      expect(recordComplaint(s, { originalRcptTo: ['z@x.org'], feedbackType: null, now: at(9) })).to.deep.equal({ kind: 'ignore', reason: 'unknown_recipient' });
      const after = fold([(v as { event: MessageEvent }).event], s);
      expect(recordComplaint(after, { originalRcptTo: ['a@x.org'], feedbackType: 'abuse', now: at(10) })).to.deep.equal({ kind: 'ignore', reason: 'already_complained' });
    });
    it('a complaint naming nobody for a message with one recipient: that recipient', () => {
      const one = acceptMessage(initialMessageState(), {
        messageId: '3f1e2d4c-5b6a-4978-8a9b-0c1d2e3f4a5c', request: validateSendRequest({ from: 'app@example.com', to: ['solo@x.org'], subject: 'Hi', text: 'Hello' }),
        motorBlockId: 'b', accountId: 'acct', domainId: 'd', smtpMessageId: 'n@example.com', idempotencyKey: null, source: 'http', now: T0,
      });
      const v = recordComplaint(given(one), { originalRcptTo: [], feedbackType: 'fraud', now: at(9) });
      expect(v.kind === 'record' && v.event.data.recipient).to.equal('solo@x.org');
    });
    it('a report naming an internationalized domain in A-labels finds the recipient addressed in U-labels', () => {
      const idn = acceptMessage(initialMessageState(), {
        messageId: '3f1e2d4c-5b6a-4978-8a9b-0c1d2e3f4a5d', request: validateSendRequest({ from: 'app@example.com', to: ['ana@bücher.example'], subject: 'Hi', text: 'Hello' }),
        motorBlockId: 'b', accountId: 'acct', domainId: 'd', smtpMessageId: 'o@example.com', idempotencyKey: null, source: 'http', now: T0,
      });
      const v = recordBounceReport(given(idn), bounceCmd(['ana@xn--bcher-kva.example']));
      expect(v.kind === 'record' && v.event.data.recipient).to.equal('ana@bücher.example');
    });
  });

  it('planDelivery: queued are due; deferred wait until nextAttemptAt; in-flight wait until stale', () => {
    expect(planDelivery(given(accepted), T0)).to.deep.equal({ kind: 'due', recipients: ['a@x.org', 'b@y.org'] });
    const started = startDelivery(given(accepted), { recipients: ['a@x.org', 'b@y.org'], now: T0 });
    const plan = planDelivery(given(accepted, started), at(1000));
    expect(plan).to.deep.equal({ kind: 'wait', at: at(IN_FLIGHT_STALE_MS) });
    expect(planDelivery(given(accepted, started), at(IN_FLIGHT_STALE_MS))).to.deep.equal({ kind: 'due', recipients: ['a@x.org', 'b@y.org'] });
    const out = recordAttempt(given(accepted, started), { results: [result('a@x.org', 'delivered', '250'), result('b@y.org', 'deferred', '421')], now: at(1000), lifetimeSeconds: 3600, retryDelaySeconds: retry });
    expect(planDelivery(given(accepted, started, out), at(2000))).to.deep.equal({ kind: 'wait', at: at(61_000) });
    expect(planDelivery(given(accepted, started, out), at(61_000))).to.deep.equal({ kind: 'due', recipients: ['b@y.org'] });
  });
});
