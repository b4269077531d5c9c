import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { Response } from 'express';
import type { BootstrapResult } from '../../../commands/admin/bootstrap';
import { streamName, type EventStore, type SubscribeOptions } from '../../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../../domain/events';
import { newId } from '../../../domain/ids';
import { EventStreams } from '../../../read-api/stream/eventStreams';
import { eventually, startTestMotor, type TestMotor } from '../../support/motor';
import { openSseStream, type SseEvent } from '../../support/sse';
import { appendOutcome, bearer, getPublic, sendMail } from '../publicApi';

const DAY_MS = 86_400_000;

/**
 * The event stream and the plan's retention window (SPEC "Data retention", docs/EVENTS.md
 * "Retention"): a resume never replays what the logs route would not list, however old the id it
 * resumes after; an id older than the window says `gap` (outside_retention_window) and the stream
 * goes on from the window's first event, found without reading the old log.
 */
describe('event stream: the retention window (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  let block: BootstrapResult;
  /** A message accepted 30 days ago (log entries as old as their data says), and its MessageAccepted's position. */
  let old: { id: string; position: string };

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'], env: { PLAN_DEFAULT_RETENTION_DAYS: '7' } });
    block = await motor.bootstrap();
    const at = new Date(Date.now() - 30 * DAY_MS);
    const id = newId();
    const recipient = 'old.secret@rcpt.test';
    const events: DomainEvent[] = [
      { type: 'MessageAccepted', data: {
        messageId: id, motorBlockId: block.motorBlockId, accountId: block.accountId, domainId: block.domainId, from: 'app@x.test', fromName: null,
        to: [recipient], subject: 'Old', text: 'x', html: null, headers: {}, smtpMessageId: `${id}@x.test`, idempotencyKey: null, source: 'http',
        metadata: {}, acceptedAt: at.toISOString(),
      } },
      { type: 'DeliverySucceeded', data: { messageId: id, recipient, at: new Date(at.getTime() + 1000).toISOString(), smtpCode: '250', smtpResponse: '250 ok', enhancedCode: null, mx: 'mx.rcpt.test', attempt: 1 } },
    ] as DomainEvent[];
    await motor.rt.store.append(streamName('message', id), events.map((e) => toEventData(newId(), e, { actor: 'test' })), { expectedRevision: 'no_stream' });
    const [accepted, outcome] = await motor.rt.store.readStream(streamName('message', id));
    old = { id, position: accepted.position };
    // The log as on an install running for 30 days: everything up to the old message is as old as it.
    const [tx, position] = outcome.position.split(':');
    await motor.rt.db.raw('update events set created_at = now() - interval \'30 days\' where (tx_id, global_position) <= (?::xid8, ?::bigint)', [tx, position]);
  });
  after(async () => { await motor?.close(); });

  const streamUrl = (query = '') => `${motor.baseUrl}/api/public/v1/motor-blocks/${block.motorBlockId}/events/stream${query}`;
  const messages = (events: SseEvent[]) => events.filter((e) => e.event === 'message');
  /** A fresh message, once the messages read model shows it (the resume finds the window's start there). */
  const fresh = async (to: string) => {
    const { id } = await sendMail(motor, block, { to });
    const token = await motor.token(block, ['logs.read']);
    await eventually(async () => (await getPublic(motor, `/messages/${id}`, token)).status === 200, 10_000);
    return id;
  };

  it('the routes refuse the old message (the reference the stream follows)', async () => {
    const token = await motor.token(block, ['logs.read']);
    const r = await eventually(async () => { const x = await getPublic(motor, `/messages/${old.id}`, token); return x.status === 400 ? x : null; }, 10_000);
    expect(r.body.code).to.equal('outside_retention_window');
  });

  it('a resume from an id older than the window says gap (outside_retention_window), then replays from the window\'s first event only', async () => {
    const m = await fresh('fresh.one@rcpt.test');
    for (const resumeFrom of ['0:0', old.position]) {
      for (const how of ['header', 'query'] as const) {
        const token = await motor.token(block, ['logs.read', 'logs.pii']);
        const s = how === 'header'
          ? await openSseStream(streamUrl('?includePII=true'), { ...bearer(token), 'last-event-id': resumeFrom })
          : await openSseStream(streamUrl(`?includePII=true&token=${token}&lastEventId=${encodeURIComponent(resumeFrom)}`));
        expect(s.res.status).to.equal(200);
        await eventually(async () => messages(s.events).some((e) => e.data.messageId === m), 10_000);
        await new Promise((r) => setTimeout(r, 300));
        s.close();
        const what = `${how} ${resumeFrom}`;
        expect(s.events.map((e) => e.event).slice(0, 2), what).to.deep.equal(['ready', 'gap']);
        expect(s.events[1].data, what).to.include({ after: resumeFrom, reason: 'outside_retention_window' });
        expect(s.events[1].data.oldestAllowed, what).to.be.a('string');
        expect(messages(s.events).filter((e) => e.data.messageId === old.id), `${what}: the 30-day-old message`).to.deep.equal([]);
        expect(JSON.stringify(s.events), what).not.to.include('old.secret');
        expect(messages(s.events).filter((e) => e.data.messageId === m).map((e) => e.data.status), what).to.deep.equal(['queued']);
        expect(s.events.filter((e) => e.event === 'gap'), `${what}: one gap`).to.have.length(1);
      }
    }
  });

  it('an id inside the window resumes as before: no gap; an outcome recorded now of a message accepted before the window is not shown, live or replayed', async () => {
    const m1 = await fresh('in.window.one@rcpt.test');
    const token = await motor.token(block, ['logs.read', 'logs.pii']);
    const live = await openSseStream(streamUrl('?includePII=true'), bearer(token));
    await eventually(async () => live.events.some((e) => e.event === 'ready'), 5000);
    // The logs route lists a message by its acceptance: the old one's late complaint stays out, as the message does.
    await appendOutcome(motor, old.id, 'old.secret@rcpt.test', 'complained');
    const m2 = await fresh('in.window.two@rcpt.test');
    await eventually(async () => messages(live.events).some((e) => e.data.messageId === m2), 10_000);
    await new Promise((r) => setTimeout(r, 300));
    live.close();
    expect(messages(live.events).filter((e) => e.data.messageId === old.id), 'live').to.deep.equal([]);

    const first = await openSseStream(streamUrl('?includePII=true'), { ...bearer(await motor.token(block, ['logs.read', 'logs.pii'])), 'last-event-id': '0:0' });
    const m1Event = await eventually(async () => messages(first.events).find((e) => e.data.messageId === m1), 10_000);
    first.close();
    const s = await openSseStream(streamUrl('?includePII=true'), { ...bearer(await motor.token(block, ['logs.read', 'logs.pii'])), 'last-event-id': m1Event.id! });
    await eventually(async () => messages(s.events).some((e) => e.data.messageId === m2), 10_000);
    await new Promise((r) => setTimeout(r, 300));
    s.close();
    expect(s.events.some((e) => e.event === 'gap'), 'no gap').to.equal(false);
    expect(messages(s.events).filter((e) => e.data.messageId === old.id), 'replayed').to.deep.equal([]);
    expect(messages(s.events).map((e) => e.data.messageId)).to.include(m2);
  });

  it('finds the window\'s start without reading the log from the old id', async () => {
    const m = await fresh('seek@rcpt.test');
    const rt = motor.rt;
    const reads: Array<string | null | undefined> = [];
    const store = Object.create(rt.store, {
      subscribeToAll: { value: (o: SubscribeOptions) => { reads.push(o.after); return rt.store.subscribeToAll(o); } },
    }) as EventStore;
    const streams = new EventStreams(rt.db, store, rt.redis, rt.logger, 60);
    const server = createServer((_req, res) => {
      void streams.serve(res as unknown as Response, {
        motorBlockId: block.motorBlockId, tokenId: newId(), endsAt: new Date(Date.now() + 20_000), unmasked: false, resumeAfter: old.position,
        retention: { days: 7, now: () => new Date() },
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const s = await openSseStream(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      await eventually(async () => messages(s.events).some((e) => e.data.messageId === m), 10_000);
      s.close();
      expect(s.events[1]).to.deep.include({ event: 'gap' });
      const replayRead = reads.filter((after) => after !== undefined && after !== null && rt.store.comparePositions(after, old.position) <= 0);
      expect(replayRead, 'a read of the log from the old id or before').to.deep.equal([]);
    } finally {
      streams.closeAll();
      server.close();
    }
  });
});
