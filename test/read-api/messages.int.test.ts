import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { toEventData } from '../../domain/events';
import { newId } from '../../domain/ids';
import { getMessage } from '../../projections/messages';
import { messagesProjection } from '../../projections/messages/projection';
import { ProjectionRunner } from '../../projections/runner';
import { catchUpUntil } from '../../scripts/runtime';
import { startTestMotor, type TestMotor } from '../support/motor';
import { appendOutcome, getPublic, sendMail } from './publicApi';

/**
 * The message routes. The Motor runs the API only; the messages projection is caught up by hand,
 * so each route is exercised both from the read model and from the read-your-writes fallback
 * (the message's own stream, before the projector has applied it).
 */
describe('GET /messages* (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let a: BootstrapResult;
  let b: BootstrapResult;
  let token: string;
  let piiToken: string;
  let otherToken: string;
  let projected: { id: string; smtpMessageId: string };
  let multi: { id: string };

  const project = async (id: string) => {
    const runner = new ProjectionRunner(motor.rt.db, motor.rt.store, messagesProjection);
    await catchUpUntil(runner, async () => (await getMessage(motor.rt.db, id)) !== null);
  };

  before(async () => {
    motor = await startTestMotor({ roles: ['api'] });
    a = await motor.bootstrap();
    b = await motor.bootstrap();
    token = await motor.token(a, ['logs.read']);
    piiToken = await motor.token(a, ['logs.read', 'logs.pii']);
    otherToken = await motor.token(b, ['logs.read', 'logs.pii']);
    const sent = await sendMail(motor, a, { to: 'person@rcpt.test' });
    await appendOutcome(motor, sent.id, 'person@rcpt.test', 'delivered');
    multi = await sendMail(motor, a, { to: ['one@rcpt.test', 'two@other.test'] });
    await appendOutcome(motor, multi.id, 'one@rcpt.test', 'bounced');
    await project(multi.id);
    const got = await getPublic(motor, `/messages/${sent.id}`, token);
    projected = { id: sent.id, smtpMessageId: got.body.data.smtpMessageId };
  });
  after(async () => { await motor?.close(); });

  describe('GET /messages/{id}', () => {
    it('200 with the outcome, masked by default', async () => {
      const r = await getPublic(motor, `/messages/${projected.id}`, token);
      expect(r.status).to.equal(200);
      expect(r.body.pii_masked).to.equal(true);
      expect(r.body.data).to.include({ id: projected.id, currentOutcome: 'delivered', isTerminal: true, smtpCode: '250', motorBlockId: a.motorBlockId });
      expect(r.body.data.recipient).to.equal('p***@r***.test');
      expect(JSON.stringify(r.body)).to.not.include('person@rcpt.test');
    });

    it('reads a message the projector has not applied yet (no 404 race)', async () => {
      const fresh = await sendMail(motor, a, { to: 'fresh@rcpt.test' });
      const r = await getPublic(motor, `/messages/${fresh.id}`, piiToken, {});
      expect(r.status).to.equal(200);
      expect(r.body.data).to.include({ id: fresh.id, currentOutcome: 'queued', isTerminal: false });
      expect(r.body.data.recipient).to.not.equal('fresh@rcpt.test');
    });

    it('includePII=true needs logs.pii: 403 without, unmasked with', async () => {
      const denied = await getPublic(motor, `/messages/${projected.id}?includePII=true`, token);
      expect(denied.status).to.equal(403);
      expect(denied.body).to.include({ success: false, code: 'insufficient_scope' });
      const shown = await getPublic(motor, `/messages/${projected.id}?includePII=true`, piiToken);
      expect(shown.status).to.equal(200);
      expect(shown.body.pii_masked).to.equal(false);
      expect(shown.body.data.recipient).to.equal('person@rcpt.test');
      const masked = await getPublic(motor, `/messages/${projected.id}`, piiToken);
      expect(masked.body.data.recipient).to.not.equal('person@rcpt.test');
    });

    it('404 for an unknown uuid and for an id that is not a uuid', async () => {
      for (const id of [newId(), 'not-a-uuid', '12345', `${newId()}x`]) {
        const r = await getPublic(motor, `/messages/${id}`, token);
        expect(r.status, id).to.equal(404);
        expect(r.body).to.include({ success: false, code: 'message_not_found' });
      }
    });

    it('403 for a token bound to another block', async () => {
      const r = await getPublic(motor, `/messages/${projected.id}`, otherToken);
      expect(r.status).to.equal(403);
      expect(r.body.code).to.equal('motor_block_forbidden');
      const fresh = await sendMail(motor, a);
      expect((await getPublic(motor, `/messages/${fresh.id}`, otherToken)).status).to.equal(403);
    });

    it('400 for an includePII that is not a boolean', async () => {
      const r = await getPublic(motor, `/messages/${projected.id}?includePII=maybe`, token);
      expect(r.status).to.equal(400);
      expect(r.body.code).to.equal('invalid_query');
    });
  });

  describe('GET /messages?smtpMessageId=', () => {
    it('finds the message with and without angle brackets', async () => {
      expect(projected.smtpMessageId).to.match(/^[^<>]+@[^<>]+$/);
      for (const sid of [projected.smtpMessageId, `<${projected.smtpMessageId}>`, ` <${projected.smtpMessageId}> `]) {
        const r = await getPublic(motor, `/messages?smtpMessageId=${encodeURIComponent(sid)}`, token);
        expect(r.status, sid).to.equal(200);
        expect(r.body.data.id).to.equal(projected.id);
        expect(r.body.pii_masked).to.equal(true);
        expect(r.body.data.recipient).to.not.equal('person@rcpt.test');
      }
      const shown = await getPublic(motor, `/messages?smtpMessageId=${encodeURIComponent(projected.smtpMessageId)}&includePII=true`, piiToken);
      expect(shown.body.data.recipient).to.equal('person@rcpt.test');
    });

    it('finds a message the projector has not applied yet', async () => {
      const fresh = await sendMail(motor, a);
      const sid = (await getPublic(motor, `/messages/${fresh.id}`, token)).body.data.smtpMessageId as string;
      const r = await getPublic(motor, `/messages?smtpMessageId=${encodeURIComponent(`<${sid}>`)}`, token);
      expect(r.status).to.equal(200);
      expect(r.body.data.id).to.equal(fresh.id);
    });

    it('404 when unknown or when the message belongs to another block; 403 for includePII without logs.pii', async () => {
      for (const sid of [`${newId()}@nowhere.test`, '<nothing@x.test>', 'no-at-sign']) {
        const r = await getPublic(motor, `/messages?smtpMessageId=${encodeURIComponent(sid)}`, token);
        expect(r.status, sid).to.equal(404);
        expect(r.body.code).to.equal('message_not_found');
      }
      const foreign = await getPublic(motor, `/messages?smtpMessageId=${encodeURIComponent(projected.smtpMessageId)}`, otherToken);
      expect(foreign.status).to.equal(404);
      const denied = await getPublic(motor, `/messages?smtpMessageId=${encodeURIComponent(projected.smtpMessageId)}&includePII=true`, token);
      expect(denied.status).to.equal(403);
      expect(denied.body.code).to.equal('insufficient_scope');
    });

    it('400 without smtpMessageId or with a blank one', async () => {
      for (const q of ['', '?smtpMessageId=', '?smtpMessageId=%20%20', '?smtpMessageId=%3C%3E']) {
        const r = await getPublic(motor, `/messages${q}`, token);
        expect(r.status, q).to.equal(400);
        expect(r.body.code, q).to.equal('invalid_query');
      }
    });
  });

  describe('GET /messages/{id}/events', () => {
    it('200 with the lifecycle, recipients masked by default', async () => {
      const r = await getPublic(motor, `/messages/${projected.id}/events`, token);
      expect(r.status).to.equal(200);
      expect(r.body.data.messageId).to.equal(projected.id);
      expect(r.body.data.pii_masked).to.equal(true);
      expect(r.body.data.events.map((e: { outcome: string }) => e.outcome)).to.deep.equal(['queued', 'processed', 'delivered']);
      expect(JSON.stringify(r.body)).to.not.include('person@rcpt.test');
      const shown = await getPublic(motor, `/messages/${projected.id}/events?includePII=true`, piiToken);
      expect(shown.body.data.pii_masked).to.equal(false);
      expect(shown.body.data.events.map((e: { recipient: string | null }) => e.recipient)).to.include('person@rcpt.test');
    });

    it('serves the timeline of a message the projector has not applied yet', async () => {
      const fresh = await sendMail(motor, a);
      const r = await getPublic(motor, `/messages/${fresh.id}/events`, token);
      expect(r.status).to.equal(200);
      expect(r.body.data.events.map((e: { outcome: string }) => e.outcome)).to.deep.equal(['queued']);
    });

    it('404 unknown / non-uuid, 403 other block, 403 includePII without logs.pii', async () => {
      for (const id of [newId(), 'not-a-uuid']) {
        const r = await getPublic(motor, `/messages/${id}/events`, token);
        expect(r.status, id).to.equal(404);
        expect(r.body.code).to.equal('message_not_found');
      }
      expect((await getPublic(motor, `/messages/${projected.id}/events`, otherToken)).status).to.equal(403);
      const denied = await getPublic(motor, `/messages/${projected.id}/events?includePII=true`, token);
      expect(denied.status).to.equal(403);
      expect(denied.body.code).to.equal('insufficient_scope');
    });
  });

  describe('GET /messages/{id}/events of a multi-recipient send: one row per step of the collapsed outcome', () => {
    type Row = { eventId: string; type: string; outcome: string; recipient: string | null; at: string; attempt: number | null; smtpCode: string | null; nextAttemptAt: string | null };
    type Step = [type: string, recipient: string, offsetMs: number, attempt?: number];
    const replies: Record<string, Record<string, unknown>> = {
      DeliveryDeferred: { smtpCode: '451', enhancedCode: '4.7.1', smtpResponse: '451 4.7.1 try later', mx: 'mx.rcpt.test' },
      DeliverySucceeded: { smtpCode: '250', enhancedCode: '2.0.0', smtpResponse: '250 2.0.0 OK', mx: 'mx.rcpt.test' },
      DeliveryBounced: { smtpCode: '550', enhancedCode: '5.1.1', smtpResponse: '550 5.1.1 No such user', mx: 'mx.rcpt.test' },
    };
    const RETRY_MS = 600_000;

    /** Sends to `to`, appends the steps (offsets after `base`) as a worker would, returns the ids and times. */
    async function scenario(to: string[], steps: Step[]) {
      const sent = await sendMail(motor, a, { to });
      const base = Date.now() + 1_000;
      const at = (ms: number) => new Date(base + ms).toISOString();
      const ids = steps.map(() => newId());
      await motor.rt.store.append(`message-${sent.id}`, steps.map(([type, recipient, offset, attempt = 1], i) => toEventData(ids[i], {
        type,
        data: {
          messageId: sent.id, recipient, at: at(offset), attempt, ...(replies[type] ?? {}),
          ...(type === 'DeliveryDeferred' ? { nextAttemptAt: at(offset + RETRY_MS) } : {}), ...(type === 'ComplaintReceived' ? { feedbackType: 'abuse' } : {}),
        },
      } as Parameters<typeof toEventData>[1], { actor: 'test' })), { expectedRevision: 'any' });
      const accepted = (await getPublic(motor, `/messages/${sent.id}/events`, token)).body.data.events[0] as Row;
      return { id: sent.id, ids, at, accepted };
    }

    /** The timeline from the stream (before the projector), then from the read model: both the same, masked and unmasked. */
    async function timelines(id: string): Promise<{ masked: Row[]; shown: Row[] }> {
      const before = { masked: (await getPublic(motor, `/messages/${id}/events`, token)).body.data.events, shown: (await getPublic(motor, `/messages/${id}/events?includePII=true`, piiToken)).body.data.events };
      const read = async () => ({ masked: (await getPublic(motor, `/messages/${id}/events`, token)).body.data.events, shown: (await getPublic(motor, `/messages/${id}/events?includePII=true`, piiToken)).body.data.events });
      await project(id);
      let after = await read();
      // project() stops once the message has a row; on a loaded host the later steps can land in the next catch-up.
      for (const deadline = Date.now() + 10_000; JSON.stringify(after) !== JSON.stringify(before) && Date.now() < deadline;) {
        await project(id);
        after = await read();
      }
      expect(after, 'read model = stream fold').to.deep.equal(before);
      return after;
    }

    const brief = (r: Row) => [r.outcome, r.type, r.eventId, r.at, r.recipient, r.smtpCode];

    it('mixed: one bounced, then the other delivered → queued, processed, bounced (at the delivery, with the bounce\'s reply)', async () => {
      const s = await scenario(['one@rcpt.test', 'two@other.test'], [
        ['DeliveryStarted', 'one@rcpt.test', 0], ['DeliveryStarted', 'two@other.test', 0],
        ['DeliveryBounced', 'one@rcpt.test', 1_000], ['DeliverySucceeded', 'two@other.test', 2_000],
      ]);
      const { masked, shown } = await timelines(s.id);
      expect(masked.map(brief)).to.deep.equal([
        ['queued', 'MessageAccepted', s.accepted.eventId, s.accepted.at, null, null],
        ['processed', 'DeliveryStarted', s.ids[1], s.at(0), 'o***@r***.test', null],
        ['bounced', 'DeliveryBounced', s.ids[3], s.at(2_000), 'o***@r***.test', '550'],
      ]);
      expect(shown.map((r) => r.recipient)).to.deep.equal([null, 'one@rcpt.test', 'one@rcpt.test']);
      expect(JSON.stringify(shown)).to.not.include('two@other.test');
      const message = (await getPublic(motor, `/messages/${s.id}?includePII=true`, piiToken)).body.data;
      expect(message).to.include({ currentOutcome: 'bounced', recipient: shown[2].recipient });
    });

    it('one deferred while the other is delivered, then retried and delivered → queued, processed, deferred, processed, delivered', async () => {
      const s = await scenario(['d1@rcpt.test', 'd2@other.test'], [
        ['DeliveryStarted', 'd1@rcpt.test', 0], ['DeliveryStarted', 'd2@other.test', 0],
        ['DeliveryDeferred', 'd1@rcpt.test', 1_000], ['DeliverySucceeded', 'd2@other.test', 2_000],
        ['DeliveryStarted', 'd1@rcpt.test', 1_000 + RETRY_MS, 2], ['DeliverySucceeded', 'd1@rcpt.test', 2_000 + RETRY_MS, 2],
      ]);
      const { masked } = await timelines(s.id);
      expect(masked.map(brief)).to.deep.equal([
        ['queued', 'MessageAccepted', s.accepted.eventId, s.accepted.at, null, null],
        ['processed', 'DeliveryStarted', s.ids[1], s.at(0), 'd***@r***.test', null],
        ['deferred', 'DeliveryDeferred', s.ids[3], s.at(2_000), 'd***@r***.test', '451'],
        ['processed', 'DeliveryStarted', s.ids[4], s.at(1_000 + RETRY_MS), 'd***@r***.test', null],
        ['delivered', 'DeliverySucceeded', s.ids[5], s.at(2_000 + RETRY_MS), 'd***@r***.test', '250'],
      ]);
      expect(masked[2]).to.include({ nextAttemptAt: s.at(1_000 + RETRY_MS), attempt: 1 });
      expect(masked.map((r) => r.attempt)).to.deep.equal([null, 1, 1, 2, 2]);
    });

    it('a complaint after both were delivered → queued, processed, delivered, complained', async () => {
      const s = await scenario(['c1@rcpt.test', 'c2@other.test'], [
        ['DeliveryStarted', 'c1@rcpt.test', 0], ['DeliveryStarted', 'c2@other.test', 0],
        ['DeliverySucceeded', 'c1@rcpt.test', 1_000], ['DeliverySucceeded', 'c2@other.test', 2_000],
        ['ComplaintReceived', 'c2@other.test', 60_000],
      ]);
      const { masked, shown } = await timelines(s.id);
      expect(masked.map(brief)).to.deep.equal([
        ['queued', 'MessageAccepted', s.accepted.eventId, s.accepted.at, null, null],
        ['processed', 'DeliveryStarted', s.ids[1], s.at(0), 'c***@r***.test', null],
        ['delivered', 'DeliverySucceeded', s.ids[3], s.at(2_000), 'c***@r***.test', '250'],
        ['complained', 'ComplaintReceived', s.ids[4], s.at(60_000), 'c***@r***.test', null],
      ]);
      expect(JSON.stringify(shown)).to.not.include('c2@other.test');
    });
  });

  describe('GET /messages/{id}/recipients', () => {
    it('200 with each recipient, masked by default', async () => {
      const r = await getPublic(motor, `/messages/${multi.id}/recipients`, token);
      expect(r.status).to.equal(200);
      expect(r.body.data).to.include({ messageId: multi.id, expectedCount: 2, allTerminal: false, pii_masked: true });
      expect(r.body.data.pii_unmask_path).to.include('includePII=true');
      expect(r.body.data.recipients.map((x: { outcome: string }) => x.outcome).sort()).to.deep.equal(['bounced', 'queued']);
      expect(JSON.stringify(r.body)).to.not.match(/one@rcpt\.test|two@other\.test/);
      const shown = await getPublic(motor, `/messages/${multi.id}/recipients?includePII=true`, piiToken);
      expect(shown.body.data.pii_masked).to.equal(false);
      expect(shown.body.data.pii_unmask_path).to.equal(null);
      expect(shown.body.data.recipients.map((x: { recipient: string }) => x.recipient).sort()).to.deep.equal(['one@rcpt.test', 'two@other.test']);
    });

    it('serves the recipients of a message the projector has not applied yet', async () => {
      const fresh = await sendMail(motor, a, { to: ['x@rcpt.test', 'y@rcpt.test'] });
      const r = await getPublic(motor, `/messages/${fresh.id}/recipients`, token);
      expect(r.status).to.equal(200);
      expect(r.body.data.expectedCount).to.equal(2);
      expect(r.body.data.recipients).to.have.length(2);
    });

    it('404 unknown / non-uuid, 403 other block, 403 includePII without logs.pii', async () => {
      for (const id of [newId(), 'not-a-uuid']) {
        const r = await getPublic(motor, `/messages/${id}/recipients`, token);
        expect(r.status, id).to.equal(404);
        expect(r.body.code).to.equal('message_not_found');
      }
      expect((await getPublic(motor, `/messages/${multi.id}/recipients`, otherToken)).status).to.equal(403);
      const denied = await getPublic(motor, `/messages/${multi.id}/recipients?includePII=true`, token);
      expect(denied.status).to.equal(403);
      expect(denied.body.code).to.equal('insufficient_scope');
    });
  });

  describe('a receiving server\'s reply that quotes the recipient', () => {
    // Postfix, Exim, postgrey... name the address in their refusals; logs.pii is what unmasks it.
    const reply = '550 5.1.1 <quoted.user@rcpt.test>: Recipient address rejected: User unknown; also quoted.user@rcpt.test...';
    let quoted: { id: string };

    before(async () => {
      quoted = await sendMail(motor, a, { to: 'quoted.user@rcpt.test' });
      const at = new Date().toISOString();
      await motor.rt.store.append(`message-${quoted.id}`, [toEventData(newId(), {
        type: 'DeliveryBounced',
        data: { messageId: quoted.id, recipient: 'quoted.user@rcpt.test', at, attempt: 1, smtpCode: '550', enhancedCode: '5.1.1', smtpResponse: reply, mx: 'mx.rcpt.test' },
      }, { actor: 'test' })], { expectedRevision: 'any' });
    });

    it('is masked on every message route without includePII, in the read model and before it', async () => {
      for (const stage of ['stream', 'read model']) {
        if (stage === 'read model') await project(quoted.id);
        for (const path of [`/messages/${quoted.id}`, `/messages/${quoted.id}/events`, `/messages/${quoted.id}/recipients`]) {
          const r = await getPublic(motor, path, token);
          expect(r.status, `${stage} ${path}`).to.equal(200);
          expect(JSON.stringify(r.body), `${stage} ${path}`).to.not.include('quoted.user@rcpt.test');
          expect(JSON.stringify(r.body), `${stage} ${path}`).to.include('550 5.1.1 <q***@r***.test>: Recipient address rejected');
        }
      }
      const logs = await getPublic(motor, `/motor-blocks/${a.motorBlockId}/logs?query=${encodeURIComponent('recipient:quoted.user@rcpt.test')}`, token);
      expect(logs.body.data.items).to.have.length(1);
      expect(JSON.stringify(logs.body)).to.not.include('quoted.user@rcpt.test');
    });

    it('is shown as received with includePII and logs.pii', async () => {
      const m = await getPublic(motor, `/messages/${quoted.id}?includePII=true`, piiToken);
      expect(m.body.data.smtpResponse).to.equal(reply);
      const r = await getPublic(motor, `/messages/${quoted.id}/recipients?includePII=true`, piiToken);
      expect(r.body.data.recipients[0].smtpResponse).to.equal(reply);
    });
  });
});
