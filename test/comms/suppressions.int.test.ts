import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { EventData, RecordedEvent } from '../../domain/eventStore';
import { commSuppressionsProjection, SUPPRESSIONS_SCHEMA } from '../../projections/commSuppressions/projection';
import { migrateProjection } from '../../projections/runner';
import { accepted, bounced, complained, deferred, delivered, failed } from '../analytics/support';
import { oauthBlock } from '../oauth/support';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, tenant, type Tenant } from './support';

/**
 * The suppression list (docs/COMMUNICATIONS.md "Suppressions"), from message outcome events appended
 * to the store as delivery would: hard bounces and complaints across the tenant's blocks suppress,
 * soft bounces, deferrals and failures do not; filters, pagination; the read model is the same
 * after a re-delivered batch, after a replay event by event, and forgets a deleted block's history.
 */
describe('communications suppressions (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: Tenant;
  let b: Tenant;
  let blockA1: string;
  let blockA2: string;
  const messages: string[] = [];
  const H = 3_600_000;
  const t0 = Date.now() - 10 * H;
  const at = (hours: number) => new Date(t0 + hours * H).toISOString();

  const send = async (accountId: string, motorBlockId: string, to: string[], acceptedAt: string, outcomes: (m: string) => EventData[]) => {
    const m = randomUUID();
    messages.push(m);
    await motor.rt.store.append(`message-${m}`, [accepted(m, motorBlockId, to, acceptedAt, accountId), ...outcomes(m)], { expectedRevision: 'no_stream' });
    return m;
  };
  const suppressions = (who: Tenant, query = '') => commGet(motor, `/suppressions${query}`, as(who));
  type Row = { email: string; reason: string; count: number; first_at: string; last_at: string; last_message_id: string; last_motor_block_id: string; smtp_code: string | null; enhanced_code: string | null };
  const byEmail = (items: Row[]) => Object.fromEntries(items.map((x) => [x.email, x]));

  let m1: string; let m2: string; let m3: string; let m4: string; let m5: string;

  before(async () => {
    motor = await startTestMotor();
    a = await tenant(motor, 'supp-a@example.test');
    b = await tenant(motor, 'supp-b@example.test');
    blockA1 = a.b.motorBlockId;
    blockA2 = (await oauthBlock(motor, a.b, 'Second block')).motorBlockId;

    m1 = await send(a.accountId, blockA1, ['Hard@Bounce.test', 'soft@bounce.test', 'ok@bounce.test', 'gone@nomx.test'], at(0), (m) => [
      bounced(m, 'Hard@Bounce.test', at(0.1), '550', '5.1.1', 'mx.bounce.test'),
      deferred(m, 'soft@bounce.test', at(0.1), '451', '4.7.1', 'mx.bounce.test'),
      delivered(m, 'ok@bounce.test', at(0.1), 'mx.bounce.test'),
      failed(m, 'gone@nomx.test', at(0.1)),
    ]);
    m2 = await send(a.accountId, blockA2, ['hard@bounce.test'], at(2), (m) => [bounced(m, 'hard@bounce.test', at(2.5), '550', '5.1.1', 'mx.bounce.test')]);
    m3 = await send(a.accountId, blockA1, ['angry@fbl.test'], at(3), (m) => [delivered(m, 'angry@fbl.test', at(3.1), 'mx.fbl.test'), complained(m, 'angry@fbl.test', at(5))]);
    m4 = await send(a.accountId, blockA2, ['both@fbl.test', 'odd@bounce.test'], at(4), (m) => [
      bounced(m, 'both@fbl.test', at(4.1), '552', '5.2.2', 'mx.fbl.test'),
      // A "bounce" with a 4xx reply is soft: the worker would have written a deferral.
      bounced(m, 'odd@bounce.test', at(4.1), '421', '4.4.2', 'mx.bounce.test'),
    ]);
    m5 = await send(a.accountId, blockA1, ['both@fbl.test'], at(6), (m) => [delivered(m, 'both@fbl.test', at(6.1), 'mx.fbl.test'), complained(m, 'both@fbl.test', at(7))]);
    // Tenant B bounced the same address: its own list, not A's.
    await send(b.accountId, b.b.motorBlockId, ['hard@bounce.test'], at(1), (m) => [bounced(m, 'hard@bounce.test', at(1.5), '550', '5.1.1', 'mx.bounce.test')]);
    await eventually(async () => (await suppressions(a)).body.data?.items.length === 3 && (await suppressions(b)).body.data?.items.length === 1, 30_000);
  });
  after(async () => { await motor?.close(); });

  it('hard bounces and complaints on any block of the tenant suppress; soft bounces, deferrals, deliveries and failures do not', async () => {
    const r = await suppressions(a);
    expect(r.status).to.equal(200);
    const rows = byEmail(r.body.data.items);
    expect(Object.keys(rows).sort()).to.deep.equal(['angry@fbl.test', 'both@fbl.test', 'hard@bounce.test']);
    expect(rows['hard@bounce.test'], 'two hard bounces on two blocks, one row (address lower-cased)').to.deep.include({
      reason: 'hard_bounce', count: 2, first_at: at(0.1), last_at: at(2.5), last_message_id: m2, last_motor_block_id: blockA2, smtp_code: '550', enhanced_code: '5.1.1',
    });
    expect(rows['angry@fbl.test']).to.deep.include({ reason: 'complaint', count: 1, first_at: at(5), last_at: at(5), last_message_id: m3, last_motor_block_id: blockA1, smtp_code: null });
    expect(rows['both@fbl.test'], 'a complaint outranks a bounce; the codes are the bounce\'s').to.deep.include({
      reason: 'complaint', count: 2, first_at: at(4.1), last_at: at(7), last_message_id: m5, last_motor_block_id: blockA1, smtp_code: '552', enhanced_code: '5.2.2',
    });
    expect(r.body.data.items.map((x: Row) => x.email), 'most recently suppressed first').to.deep.equal(['angry@fbl.test', 'both@fbl.test', 'hard@bounce.test']);
    expect(r.body.data.next_cursor).to.equal(null);
    const other = (await suppressions(b)).body.data.items;
    expect(other.map((x: Row) => [x.email, x.count])).to.deep.equal([['hard@bounce.test', 1]]);
    expect(m1).to.be.a('string');
    expect(m4).to.be.a('string');
  });

  it('filters: email (exact, case-insensitive), reason; bad values are 400', async () => {
    const one = await suppressions(a, `?email=${encodeURIComponent(' HARD@bounce.TEST ')}`);
    expect(one.body.data.items.map((x: Row) => x.email)).to.deep.equal(['hard@bounce.test']);
    expect((await suppressions(a, '?email=hard@bounce')).body.data.items, 'exact, not a prefix').to.deep.equal([]);
    expect((await suppressions(a, '?email=soft@bounce.test')).body.data.items).to.deep.equal([]);
    expect((await suppressions(a, '?reason=complaint')).body.data.items.map((x: Row) => x.email)).to.deep.equal(['angry@fbl.test', 'both@fbl.test']);
    expect((await suppressions(a, '?reason=hard_bounce')).body.data.items.map((x: Row) => x.email)).to.deep.equal(['hard@bounce.test']);
    expect((await suppressions(a, '?reason=complaint&email=angry@fbl.test')).body.data.items).to.have.length(1);
    for (const q of ['?reason=soft_bounce', '?limit=0', '?limit=501', '?limit=2.5', `?email=${'x'.repeat(321)}`]) {
      const r = await suppressions(a, q);
      expect([r.status, r.body.code], q).to.deep.equal([400, 'invalid_query']);
    }
    expect((await suppressions(a, '?cursor=garbage')).body.code).to.equal('invalid_cursor');
    expect((await suppressions(a, '?limit=500')).status).to.equal(200);
  });

  it('pagination: limit=1 and next_cursor walk the rows once, in order', async () => {
    const all = (await suppressions(a)).body.data.items.map((x: Row) => x.email);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await suppressions(a, `?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      seen.push(...r.body.data.items.map((x: Row) => x.email));
      cursor = r.body.data.next_cursor;
    } while (cursor !== null && seen.length < 10);
    expect(seen).to.deep.equal(all);
  });

  describe('the read model on replay', () => {
    const scratch = 'rm_commsuppressions_replaytest';
    const snapshot = async (schema: string) =>
      (await motor.rt.db.raw(`select id, account_id, email, reason, count, first_at, last_at, last_message_id, last_motor_block_id, smtp_code, enhanced_code
        from "${schema}"."suppressions" order by account_id, email`)).rows;
    let events: RecordedEvent[];
    const apply = (schema: string, batch: RecordedEvent[]) => motor.rt.db.transaction((trx) => commSuppressionsProjection.applyBatch(trx, schema, batch));

    before(async () => {
      events = [];
      // Each message was appended whole, one after the other: this is log order.
      for (const m of messages) events.push(...await motor.rt.store.readStream(`message-${m}`));
    });

    it('a batch applied twice, or one event at a time, gives the rows the live projector made', async () => {
      const live = await snapshot(SUPPRESSIONS_SCHEMA);
      expect(live).to.have.length(4);
      await migrateProjection(motor.rt.db, commSuppressionsProjection, scratch);
      await apply(scratch, events);
      expect(await snapshot(scratch)).to.deep.equal(live);
      await apply(scratch, events);
      expect(await snapshot(scratch), 'the same batch re-delivered').to.deep.equal(live);
      await apply(scratch, events.slice(3, 9));
      expect(await snapshot(scratch), 'part of it re-delivered').to.deep.equal(live);

      const oneByOne = `${scratch}_single`;
      await migrateProjection(motor.rt.db, commSuppressionsProjection, oneByOne);
      for (const e of events) await apply(oneByOne, [e]);
      expect(await snapshot(oneByOne)).to.deep.equal(live);
    });

    it('a deleted block\'s history (tombstone) leaves the rows the other blocks make', async () => {
      const tombstone = {
        id: randomUUID(), streamId: `motorBlock-${blockA2}`, type: 'MotorBlockDeleted', revision: 9n, position: '0', createdAt: new Date(), metadata: {},
        data: { motorBlockId: blockA2, accountId: a.accountId, jobId: randomUUID(), historyDeleted: true, messagesDeleted: 2, streamsDeleted: 2, eventsDeleted: 5, deletedAt: new Date().toISOString() },
      } as unknown as RecordedEvent;
      await apply(scratch, [tombstone]);
      const rows = (await snapshot(scratch)).filter((r: { account_id: string }) => r.account_id === a.accountId);
      const got = Object.fromEntries(rows.map((r: { email: string; reason: string; count: number; last_motor_block_id: string; smtp_code: string | null }) =>
        [r.email, [r.reason, r.count, r.last_motor_block_id, r.smtp_code]]));
      expect(got).to.deep.equal({
        'hard@bounce.test': ['hard_bounce', 1, blockA1, '550'],
        'angry@fbl.test': ['complaint', 1, blockA1, null],
        'both@fbl.test': ['complaint', 1, blockA1, null],
      });
      // Replaying the remaining history (the block's streams are gone) gives the same.
      const fresh = `${scratch}_fresh`;
      await migrateProjection(motor.rt.db, commSuppressionsProjection, fresh);
      const blockA2Messages = new Set([m2, m4]);
      await apply(fresh, events.filter((e) => !blockA2Messages.has((e.data as { messageId: string }).messageId)));
      expect(await snapshot(fresh)).to.deep.equal(await snapshot(scratch));
    });

    after(async () => {
      for (const s of [scratch, `${scratch}_single`, `${scratch}_fresh`]) await motor.rt.db.raw(`drop schema if exists "${s}" cascade`);
    });
  });
});
