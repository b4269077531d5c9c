import { expect } from 'chai';
import type { Knex } from 'knex';
import { randomUUID } from 'node:crypto';
import { createDb } from '../../infra/db.js';
import { analyticsProjection } from '../../projections/analytics/projection.js';
import { ReputationCache } from '../../projections/analytics/sendPolicy.js';
import { migrateProjection } from '../../projections/runner.js';
import { createTestDatabase } from '../support/db.js';

/** The send path's reputation and warm-up lookups against the real analytics read model. */
describe('ReputationCache (PostgreSQL)', function () {
  this.timeout(60_000);
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  const queries = { reputation: 0, firstSend: 0 };

  before(async () => {
    dbh = await createTestDatabase('repcache');
    db = createDb(dbh.url);
    await migrateProjection(db, analyticsProjection);
    db.on('query', (q: { sql: string }) => {
      if (/block_hourly/.test(q.sql)) queries.reputation++;
      if (/domain_first_send/.test(q.sql)) queries.firstSend++;
    });
  });
  after(async () => {
    await db?.destroy();
    await dbh?.drop();
  });

  it('answers 50 concurrent sends of one block with one reputation query and one warm-up query per TTL', async () => {
    let clock = 1_000_000;
    const cache = new ReputationCache(db, 30_000, () => clock);
    const block = randomUUID();
    const domain = randomUUID();
    const now = new Date();
    const reps = await Promise.all(Array.from({ length: 50 }, () => cache.get(block, 30, now)));
    const firsts = await Promise.all(Array.from({ length: 50 }, () => cache.firstSend(domain)));
    expect(new Set(reps.map((r) => JSON.stringify(r))).size, 'one answer for all').to.equal(1);
    expect(firsts.every((f) => f === null)).to.equal(true);
    expect(queries).to.deep.equal({ reputation: 1, firstSend: 1 });
    clock += 30_000;
    await Promise.all(Array.from({ length: 50 }, () => Promise.all([cache.get(block, 30, now), cache.firstSend(domain)])));
    expect(queries, 'expired: one more of each').to.deep.equal({ reputation: 2, firstSend: 2 });
  });
});
