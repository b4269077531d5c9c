import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb } from '../../infra/db.js';
import { selectByIds, selectByIdsSql } from '../../projections/lookup.js';
import { createTestDatabase } from '../support/db.js';

/**
 * A read model's state table that was never analyzed (fresh rebuild, autovacuum off or behind):
 * the lookup must still probe the index per id. `= any($1)` plans a sequential scan there.
 */
describe('selectByIds on a table without statistics (PostgreSQL)', function () {
  this.timeout(60_000);
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  const sample: string[] = [];

  before(async () => {
    dbh = await createTestDatabase('lookup');
    db = createDb(dbh.url);
    await db.raw(`create table stats (message_id uuid not null, recipient text not null, outcome text not null, primary key (message_id, recipient))
      with (autovacuum_enabled = false)`);
    await db.raw(`insert into stats select gen_random_uuid(), 'user' || g || '@corp.test', 'delivered' from generate_series(1, 200000) g`);
    // A second recipient on a few messages: a lookup returns every row of its id.
    const r = await db.raw(`insert into stats select message_id, 'second@corp.test', 'bounced' from stats limit 3 returning message_id`);
    for (const row of r.rows as Array<{ message_id: string }>) sample.push(row.message_id);
    const analyzed = await db.raw(`select last_analyze, last_autoanalyze from pg_stat_user_tables where relname = 'stats'`);
    expect(analyzed.rows[0]).to.deep.equal({ last_analyze: null, last_autoanalyze: null });
  });
  after(async () => {
    await db?.destroy();
    await dbh?.drop();
  });

  const plan = async (sql: string, ids: string[]): Promise<string> => {
    const r = await db.raw(`explain ${sql}`, [ids]);
    return (r.rows as Array<{ 'QUERY PLAN': string }>).map((x) => x['QUERY PLAN']).join('\n');
  };

  it('plans index probes for 50 and for 2,500 ids where `= any` would scan the table', async () => {
    for (const n of [50, 2500]) {
      const ids = Array.from({ length: n }, () => randomUUID());
      const lookup = await plan(selectByIdsSql('stats', 'message_id'), ids);
      expect(lookup, `${n} ids`).to.match(/Index|Bitmap/);
      expect(lookup, `${n} ids`).not.to.match(/Seq Scan on stats/);
      // The form it replaces: this is what made live analytics batches scan 5.5 M rows.
      expect(await plan('select * from stats where message_id = any(?::uuid[])', ids), `${n} ids, = any`).to.match(/Seq Scan on stats/);
    }
  });

  it('returns every row of each id found, and nothing for unknown ids', async () => {
    const unknown = randomUUID();
    const rows = await selectByIds<{ message_id: string; recipient: string }>(db, 'stats', 'message_id', [...sample, unknown]);
    expect(rows).to.have.length(6);
    expect(new Set(rows.map((r) => r.message_id))).to.deep.equal(new Set(sample));
    expect(rows.filter((r) => r.recipient === 'second@corp.test')).to.have.length(3);
    expect(await selectByIds(db, 'stats', 'message_id', [])).to.deep.equal([]);
  });
});
