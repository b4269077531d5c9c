import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import type { EventData } from '../../domain/eventStore.js';
import { DomainError } from '../../domain/errors.js';
import { createDb } from '../../infra/db.js';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore.js';
import { messagesProjection } from '../../projections/messages/projection.js';
import { getMessage, getMessageBySmtpId, getMessageEvents, getRecipients, messageRecordOf, searchLogs } from '../../projections/messages/queries.js';
import { foldMessageView, messageTimelineOf } from '../../projections/messages/view.js';
import { ProjectionRunner } from '../../projections/runner.js';
import { createTestDatabase } from '../support/db.js';
import { acceptedEvent, catchUpAll, recipientEvent } from './fixtures.js';

const BLOCK = '22222222-2222-4222-8222-222222222222';
const OTHER_BLOCK = '55555555-5555-4555-8555-555555555555';

describe('messages queries (PostgreSQL)', function () {
  this.timeout(60_000);
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  let store: PostgresEventStore;
  const ids: string[] = [];
  let multi: string;
  let appended = 0;

  const append = async (id: string, events: EventData[]) => {
    appended += events.length;
    await store.append(`message-${id}`, events);
  };

  before(async () => {
    dbh = await createTestDatabase('proj_queries');
    db = createDb(dbh.url);
    store = new PostgresEventStore(dbh.url);
    await store.init();
    // 25 single-recipient messages, one a second, alternating outcomes.
    for (let i = 0; i < 25; i++) {
      const id = randomUUID();
      ids.push(id);
      const r = `user${i}@${i % 2 ? 'gmail.test' : 'corp.test'}`;
      const events = [acceptedEvent(id, BLOCK, [r], i * 1000, { order: String(i), tier: i % 3 === 0 ? 'gold' : 'basic' })];
      if (i % 5 !== 0) events.push(recipientEvent('DeliveryStarted', id, r, i * 1000 + 10));
      if (i % 5 === 1) events.push(recipientEvent('DeliverySucceeded', id, r, i * 1000 + 20));
      if (i % 5 === 2) events.push(recipientEvent('DeliveryBounced', id, r, i * 1000 + 20));
      if (i % 5 === 3) events.push(recipientEvent('DeliveryFailed', id, r, i * 1000 + 20));
      if (i % 5 === 4) events.push(recipientEvent('DeliveryDeferred', id, r, i * 1000 + 20));
      await append(id, events);
    }
    multi = randomUUID();
    await append(multi, [
      acceptedEvent(multi, BLOCK, ['a@multi.test', 'b@multi.test'], 100_000),
      recipientEvent('DeliveryStarted', multi, 'a@multi.test', 100_010),
      recipientEvent('DeliveryStarted', multi, 'b@multi.test', 100_011),
      recipientEvent('DeliverySucceeded', multi, 'a@multi.test', 100_020),
    ]);
    const foreign = randomUUID();
    await append(foreign, [acceptedEvent(foreign, OTHER_BLOCK, ['user1@gmail.test'], 5_000)]);
    const runner = new ProjectionRunner(db, store, messagesProjection, { batchSize: 16 });
    await runner.init();
    await catchUpAll(runner, appended);
  });
  after(async () => {
    await store.close();
    await db.destroy();
    await dbh.drop();
  });

  it('getMessage returns the collapsed row; null for unknown or malformed ids', async () => {
    const m = await getMessage(db, multi);
    expect(m).to.include({ currentOutcome: 'processed', isTerminal: false, expectedCount: 2, motorBlockId: BLOCK, from: 'app@sender.test' });
    expect(m!.recipients).to.deep.equal(['a@multi.test', 'b@multi.test']);
    expect(m!.deliveredAt?.toISOString()).to.equal(new Date(Date.UTC(2026, 0, 1) + 100_020).toISOString());
    expect(await getMessage(db, randomUUID())).to.equal(null);
    expect(await getMessage(db, 'not-a-uuid')).to.equal(null);
  });

  it('the projection and the fold of the stream agree (read-your-writes fallback)', async () => {
    const stream = await store.readStream(`message-${multi}`);
    expect(messageRecordOf(foldMessageView(stream)!)).to.deep.equal(await getMessage(db, multi));
    expect(messageTimelineOf(stream)).to.deep.equal(await getMessageEvents(db, multi));
  });

  it('getMessageBySmtpId accepts angle brackets and stays inside the caller scope', async () => {
    const sid = `${ids[3]}@sender.test`;
    expect((await getMessageBySmtpId(db, { motorBlockIds: [BLOCK] }, `<${sid}>`))?.id).to.equal(ids[3]);
    expect((await getMessageBySmtpId(db, { accountId: '33333333-3333-4333-8333-333333333333' }, sid))?.id).to.equal(ids[3]);
    expect(await getMessageBySmtpId(db, { motorBlockIds: [OTHER_BLOCK] }, sid)).to.equal(null);
    expect(await getMessageBySmtpId(db, { motorBlockIds: [] }, sid)).to.equal(null);
  });

  it('getRecipients and getMessageEvents', async () => {
    const r = await getRecipients(db, multi);
    expect(r).to.include({ expectedCount: 2, allTerminal: false });
    expect(r!.recipients.map((x) => [x.recipient, x.outcome])).to.deep.equal([['a@multi.test', 'delivered'], ['b@multi.test', 'processed']]);
    // One row per step of the collapsed outcome: b's start makes the message processed; a's delivery changes nothing.
    const ev = await getMessageEvents(db, multi);
    expect(ev.map((e) => [e.type, e.outcome, e.recipient])).to.deep.equal([['MessageAccepted', 'queued', null], ['DeliveryStarted', 'processed', 'a@multi.test']]);
    expect(ev[1].at.toISOString()).to.equal(new Date(Date.UTC(2026, 0, 1) + 100_011).toISOString());
    expect(await getRecipients(db, randomUUID())).to.equal(null);
    expect(await getMessageEvents(db, randomUUID())).to.deep.equal([]);
  });

  it('pages newest first with an opaque cursor, no duplicates and no gaps', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: Awaited<ReturnType<typeof searchLogs>> = await searchLogs(db, { motorBlockId: BLOCK, limit: 7, cursor });
      seen.push(...page.items.map((m) => m.id));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).to.equal(4);
    expect(seen).to.deep.equal([multi, ...[...ids].reverse()]);
  });

  it('filters by recipient, domain, status (incl. sent), metadata, time range, ANDed', async () => {
    const q = async (s: Partial<Parameters<typeof searchLogs>[1]>) => (await searchLogs(db, { motorBlockId: BLOCK, ...s })).items.map((m) => m.id);
    expect(await q({ query: 'recipient:user1@gmail.test' })).to.deep.equal([ids[1]]);
    expect(await q({ query: 'recipient:USER1@GMAIL.TEST' })).to.deep.equal([]); // local part is case-sensitive
    expect(await q({ query: 'recipient:user1@GMAIL.test' })).to.deep.equal([ids[1]]);
    expect((await q({ query: 'domain:gmail.test' })).length).to.equal(12);
    expect(await q({ query: 'domain:multi.test' })).to.deep.equal([multi]);
    expect(await q({ query: 'status:bounced' })).to.deep.equal([22, 17, 12, 7, 2].map((i) => ids[i]));
    expect(await q({ status: 'bounced' })).to.deep.equal([22, 17, 12, 7, 2].map((i) => ids[i]));
    expect(await q({ status: 'queued,failed' })).to.have.length(10);
    expect(await q({ query: 'status:queued' })).to.deep.equal([20, 15, 10, 5, 0].map((i) => ids[i]));
    // sent = everything but queued and failed: 25 - 5 queued - 5 failed + the in-flight multi message
    expect(await q({ query: 'status:sent' })).to.have.length(16);
    expect(await q({ query: 'metadata.tier:gold status:delivered' })).to.deep.equal([ids[21], ids[6]]);
    expect(await q({ query: 'metadata.order:3 metadata.tier:gold' })).to.deep.equal([ids[3]]);
    expect(await q({ query: 'metadata.order:3 metadata.order:4' })).to.deep.equal([]);
    expect(await q({ query: 'domain:gmail.test status:bounced' })).to.deep.equal([17, 7].map((i) => ids[i]));
    const t = (s: number) => new Date(Date.UTC(2026, 0, 1) + s * 1000).toISOString();
    expect(await q({ from: t(20), to: t(22) })).to.deep.equal([22, 21, 20].map((i) => ids[i]));
    expect(await q({ motorBlockId: OTHER_BLOCK })).to.have.length(1);
  });

  it('rejects bad input with stable codes', async () => {
    const code = async (s: Partial<Parameters<typeof searchLogs>[1]>) => {
      try {
        await searchLogs(db, { motorBlockId: BLOCK, ...s });
        return 'ok';
      } catch (e) {
        return e instanceof DomainError ? e.code : String(e);
      }
    };
    expect(await code({ query: 'hello' })).to.equal('invalid_query');
    expect(await code({ status: 'lost' })).to.equal('invalid_query');
    expect(await code({ limit: 0 })).to.equal('invalid_query');
    expect(await code({ limit: 1001 })).to.equal('invalid_query');
    expect(await code({ from: 'yesterday' })).to.equal('invalid_query');
    expect(await code({ cursor: 'garbage' })).to.equal('invalid_cursor');
    expect(await code({ limit: 1000 })).to.equal('ok');
  });
});
