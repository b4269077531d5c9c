import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { EventData } from '../../domain/eventStore';
import { suppressionIdOf } from '../../domain/comms/suppressions';
import { SUPPRESSIONS_SCHEMA } from '../../projections/commSuppressions/projection';
import { accepted, bounced } from '../analytics/support';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, tenant, type Tenant } from './support';

/**
 * A second adversarial review of lists (read one, rename, delete) and manual suppressions
 * (docs/COMMUNICATIONS.md "Lists", "Suppressions", "Suppressing an address by hand", "Lifting a
 * suppression"): each case here failed before its fix.
 */
describe('communications review 2 (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: Tenant;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    a = await tenant(motor, 'review2-a@example.test');
  });
  after(async () => { await motor?.close(); });

  type Row = { id: string; email: string; reason: string; count: number; note: string | null };
  const rowOf = async (t: Tenant, email: string): Promise<Row | undefined> =>
    ((await commGet(motor, `/suppressions?email=${encodeURIComponent(email)}`, as(t))).body.data.items as Row[])[0];
  const send = async (t: Tenant, to: string, acceptedAt: string, outcomes: (m: string) => EventData[]) => {
    const m = randomUUID();
    await motor.rt.store.append(`message-${m}`, [accepted(m, t.b.motorBlockId, [to], acceptedAt, t.accountId), ...outcomes(m)], { expectedRevision: 'no_stream' });
    return m;
  };
  const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

  it('POST /suppressions with the projector behind: the answer is the add alone (reason manual, count 1), not the stale hard-bounce row', async () => {
    const email = 'stale@review2.test';
    await send(a, email, ago(10), (m) => [bounced(m, email, ago(9), '550', '5.1.1', 'mx.review2.test')]);
    await eventually(async () => rowOf(a, email));
    // The projector cannot write a manual add while this lock is held (plain reads still can).
    const trx = await motor.rt.db.transaction();
    try {
      await trx.raw(`lock table "${SUPPRESSIONS_SCHEMA}"."manual_adds" in exclusive mode`);
      const r = await commPost(motor, '/suppressions', { email, note: 'by phone' }, as(a));
      expect(r.status).to.equal(201);
      expect(r.body.data).to.deep.include({ id: suppressionIdOf(a.accountId, email), email, reason: 'manual', count: 1, note: 'by phone', last_message_id: null, smtp_code: null });
    } finally {
      await trx.commit();
    }
    const row = await eventually(async () => ((await rowOf(a, email))?.reason === 'manual' ? rowOf(a, email) : undefined));
    expect(row).to.deep.include({ reason: 'manual', count: 2, note: 'by phone' });
  });
});
