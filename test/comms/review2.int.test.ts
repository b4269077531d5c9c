import { expect } from 'chai';
import type { EventData } from '../../domain/eventStore';
import { suppressionIdOf } from '../../domain/comms/suppressions';
import { SUPPRESSIONS_SCHEMA } from '../../projections/commSuppressions/projection';
import { bounced } from '../analytics/support';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { appendMessage, as, commPost, minutesAgo, suppressionRowOf, tenant, type Tenant } from './support';

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

  const rowOf = (t: Tenant, email: string) => suppressionRowOf(motor, t, email);
  const send = (t: Tenant, to: string, acceptedAt: string, outcomes: (m: string) => EventData[]) => appendMessage(motor, t, to, acceptedAt, outcomes);
  const ago = minutesAgo;

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
