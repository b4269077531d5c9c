import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { EventData, RecordedEvent } from '../../domain/eventStore';
import { commSuppressionsProjection, SUPPRESSIONS_SCHEMA } from '../../projections/commSuppressions/projection';
import { suppressedAmong } from '../../projections/commSuppressions/queries';
import { migrateProjection } from '../../projections/runner';
import { bounced, complained } from '../analytics/support';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { appendMessage, liftAs, minutesAgo, suppressionRowOf, tenant, type Tenant } from './support';

/**
 * DELETE /comm-api/api/suppressions/{id} (docs/COMMUNICATIONS.md "Lifting a suppression"): a
 * hard-bounce suppression is lifted until the next hard bounce; complaints and unsubscribes are the
 * recipient's decision (409); another tenant's suppression is 404; the read model rebuilt from the
 * log gives the same rows.
 */
describe('communications: lifting a suppression (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: Tenant;
  let b: Tenant;

  const send = (t: Tenant, to: string[], acceptedAt: string, outcomes: (m: string) => EventData[]) => appendMessage(motor, t, to, acceptedAt, outcomes);
  const rowOf = (t: Tenant, email: string) => suppressionRowOf(motor, t, email);
  const lift = (t: Tenant, id: string) => liftAs(motor, t, id);
  const ago = minutesAgo;

  before(async () => {
    motor = await startTestMotor();
    a = await tenant(motor, 'lift-a@example.test');
    b = await tenant(motor, 'lift-b@example.test');
  });
  after(async () => { await motor?.close(); });

  it('a hard bounce is lifted: gone from the list and from suppressedAmong, until a later hard bounce suppresses it again', async () => {
    await send(a, ['Fixed@Bounce.test'], ago(30), (m) => [bounced(m, 'Fixed@Bounce.test', ago(29), '550', '5.1.1', 'mx.bounce.test')]);
    await send(a, ['fixed@bounce.test'], ago(20), (m) => [bounced(m, 'fixed@bounce.test', ago(19), '550', '5.1.1', 'mx.bounce.test')]);
    const row = await eventually(async () => ((await rowOf(a, 'fixed@bounce.test'))?.count === 2 ? rowOf(a, 'fixed@bounce.test') : undefined));
    expect(row!.reason).to.equal('hard_bounce');

    expect(await lift(b, row!.id), 'another tenant').to.deep.include({ status: 404 });
    expect((await lift(b, row!.id)).body.code).to.equal('suppression_not_found');
    // The id in capitals is the same suppression (as list, contact and campaign ids are).
    const r = await lift(a, row!.id.toUpperCase());
    expect(r).to.deep.equal({ status: 200, body: { success: true, data: { id: row!.id, email: 'fixed@bounce.test', lifted: true } } });
    // Read-your-writes: the next GET no longer lists it, and campaigns no longer skip it.
    expect(await rowOf(a, 'fixed@bounce.test')).to.equal(undefined);
    expect([...await suppressedAmong(motor.rt.db, a.accountId, ['FIXED@bounce.test'])]).to.deep.equal([]);
    expect((await lift(a, row!.id)).body.code, 'lifted already').to.equal('suppression_not_found');

    // A hard bounce after the lift suppresses it again, counting only what came after.
    const later = new Date(Date.now() + 1000).toISOString();
    await send(a, ['fixed@bounce.test'], later, (m) => [bounced(m, 'fixed@bounce.test', later, '550', '5.1.1', 'mx.bounce.test')]);
    const again = await eventually(async () => rowOf(a, 'fixed@bounce.test'));
    expect(again).to.deep.include({ id: row!.id, reason: 'hard_bounce', count: 1 });
  });

  it('a complaint is not liftable (409 with its reason), even with hard bounces of its own; bad ids are 404', async () => {
    await send(a, ['angry@fbl.test'], ago(40), (m) => [bounced(m, 'angry@fbl.test', ago(39), '550', '5.1.1', 'mx.fbl.test'), complained(m, 'angry@fbl.test', ago(38))]);
    const row = await eventually(async () => rowOf(a, 'angry@fbl.test'));
    const r = await lift(a, row!.id);
    expect(r.status).to.equal(409);
    expect(r.body).to.deep.include({ code: 'suppression_not_liftable' });
    expect(r.body.details ?? r.body).to.deep.include({ reason: 'complaint' });
    expect(await rowOf(a, 'angry@fbl.test')).to.deep.include({ reason: 'complaint', count: 2 });
    expect(await motor.rt.store.readStream(`suppression-${row!.id}`)).to.deep.equal([]);
    for (const id of [randomUUID(), 'not-a-uuid']) expect((await lift(a, id)).body.code, id).to.equal('suppression_not_found');
  });

  it('the read model rebuilt from the log, or applied one event at a time, gives the live rows', async () => {
    const log: RecordedEvent[] = [];
    for (let after: string | null = null; ;) {
      const page = await motor.rt.store.readAll({ after, maxCount: 1000 });
      if (page.length === 0) break;
      log.push(...page.filter((e) => commSuppressionsProjection.handles.includes(e.type)));
      after = page[page.length - 1].position;
    }
    expect(log.some((e) => e.type === 'SuppressionLifted')).to.equal(true);
    const snapshot = async (schema: string) =>
      (await motor.rt.db.raw(`select id, account_id, email, reason, count, first_at, last_at, smtp_code from "${schema}"."suppressions" order by account_id, email`)).rows;
    const live = await snapshot(SUPPRESSIONS_SCHEMA);
    for (const [schema, batches] of [['rm_commsuppressions_lifttest', [log, log]], ['rm_commsuppressions_lifttest_single', log.map((e) => [e])]] as const) {
      await migrateProjection(motor.rt.db, commSuppressionsProjection, schema);
      try {
        for (const batch of batches) await motor.rt.db.transaction((trx) => commSuppressionsProjection.applyBatch(trx, schema, batch as RecordedEvent[]));
        expect(await snapshot(schema), schema).to.deep.equal(live);
      } finally {
        await motor.rt.db.raw(`drop schema if exists "${schema}" cascade`);
      }
    }
  });
});
