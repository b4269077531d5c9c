import { expect } from 'chai';
import { createDb } from '../../infra/db.js';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore.js';
import { TEST_PG_ADMIN_URL } from '../support/db.js';

/** Every Motor session runs with JIT off (infra/db.ts SESSION_OPTIONS); DATABASE_URL can say otherwise. */
describe('PostgreSQL session options', () => {
  const jitOf = async (url: string): Promise<string> => {
    const db = createDb(url);
    try {
      return (await db.raw('show jit')).rows[0].jit as string;
    } finally {
      await db.destroy();
    }
  };

  it('read models and the event store connect with jit off', async () => {
    expect(await jitOf(TEST_PG_ADMIN_URL)).to.equal('off');
    const store = new PostgresEventStore(TEST_PG_ADMIN_URL);
    try {
      const pool = (store as unknown as { pool: { query(sql: string): Promise<{ rows: Array<{ jit: string }> }> } }).pool;
      expect((await pool.query('show jit')).rows[0].jit).to.equal('off');
    } finally {
      await store.close();
    }
  });

  it('an options parameter in the URL wins', async () => {
    const u = new URL(TEST_PG_ADMIN_URL);
    u.searchParams.set('options', '-c jit=on');
    expect(await jitOf(u.toString())).to.equal('on');
  });
});
