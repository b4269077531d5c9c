import { expect } from 'chai';
import type { Knex } from 'knex';
import { randomUUID } from 'node:crypto';
import { DirectoryCache } from '../../commands/directoryCache.js';
import { createDb } from '../../infra/db.js';
import { directoryProjection } from '../../projections/directory/projection.js';
import { migrateProjection } from '../../projections/runner.js';
import { createTestDatabase } from '../support/db.js';

/** The send path's directory cache against the real read model: how many queries reach PostgreSQL. */
describe('DirectoryCache (PostgreSQL)', function () {
  this.timeout(60_000);
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  let queries = 0;
  let clock = 1_000_000;

  before(async () => {
    dbh = await createTestDatabase('dircache');
    db = createDb(dbh.url);
    await migrateProjection(db, directoryProjection);
    db.on('query', (q: { sql: string }) => {
      if (/rm_directory.*domains/.test(q.sql)) queries++;
    });
  });
  after(async () => {
    await db?.destroy();
    await dbh?.drop();
  });
  beforeEach(() => { queries = 0; });

  it('answers 50 concurrent misses of one key with one query, and again once per TTL', async () => {
    const cache = new DirectoryCache(db, 2000, () => clock);
    const id = randomUUID();
    const first = await Promise.all(Array.from({ length: 50 }, () => cache.domain(id)));
    expect(first.every((d) => d === null)).to.equal(true);
    expect(queries).to.equal(1);
    await cache.domain(id);
    expect(queries, 'a hit within the TTL').to.equal(1);
    clock += 2000;
    await Promise.all(Array.from({ length: 50 }, () => cache.domain(id)));
    expect(queries, 'expired: one more query for all of them').to.equal(2);
    // Different keys do not share.
    await Promise.all([cache.domain(randomUUID()), cache.domain(randomUUID())]);
    expect(queries).to.equal(4);
  });

  it('with a TTL of 0 reads on every call', async () => {
    const cache = new DirectoryCache(db, 0, () => clock);
    const id = randomUUID();
    await Promise.all(Array.from({ length: 5 }, () => cache.domain(id)));
    expect(queries).to.equal(5);
  });

  it('does not serve, after clear(), a load that was in flight before it', async () => {
    const cache = new DirectoryCache(db, 2000, () => clock);
    const id = randomUUID();
    const before = cache.domain(id);
    cache.clear();
    const after = cache.domain(id);
    await Promise.all([before, after]);
    expect(queries, 'the call after clear() ran its own query').to.equal(2);
    await cache.domain(id);
    expect(queries, 'the second load was cached').to.equal(2);
  });
});
