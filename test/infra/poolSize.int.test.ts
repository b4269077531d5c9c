import { expect } from 'chai';
import { startTestMotor, type TestMotor } from '../support/motor.js';

/** DATABASE_POOL_SIZE sizes both PostgreSQL pools of a process (docs/OPERATIONS.md "Connections"). */
describe('DATABASE_POOL_SIZE (int)', function () {
  this.timeout(60_000);
  let motor: TestMotor;
  before(async () => { motor = await startTestMotor({ roles: ['api'], env: { DATABASE_POOL_SIZE: '7' } }); });
  after(async () => { await motor?.close(); });

  it('the read models\' pool and the event store\'s pool both hold at most that many', async () => {
    const knexPool = (motor.rt.db.client as unknown as { pool: { max: number } }).pool;
    const storePool = (motor.rt.store as unknown as { pool: { options: { max: number } } }).pool;
    expect([knexPool.max, storePool.options.max]).to.deep.equal([7, 7]);
    // Seven statements at once on each pool, all answered: the pools work at that size.
    const held = await Promise.all(Array.from({ length: 7 }, () => motor.rt.db.raw('SELECT pg_sleep(0.05), 1 AS one')));
    expect(held.map((r) => r.rows[0].one)).to.deep.equal(Array(7).fill(1));
  });
});
