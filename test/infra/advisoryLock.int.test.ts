import { expect } from 'chai';
import type { Knex } from 'knex';
import { randomUUID } from 'node:crypto';
import { createDb } from '../../infra/db.js';
import { withTurn } from '../../infra/advisoryLock.js';
import { sleep } from '../../infra/sleep.js';
import { TEST_PG_ADMIN_URL } from '../support/db.js';

class Busy extends Error {}

describe('withTurn: an advisory lock whose waiters hold no connection (int)', () => {
  let db: Knex;
  before(() => { db = createDb(TEST_PG_ADMIN_URL, { pool: { min: 0, max: 3 } }); });
  after(async () => { await db?.destroy(); });

  const options = (waitMs = 20_000) => ({ waitMs, busy: () => new Busy('busy') });

  it('callers of one name take turns, every one of them: 12 at once never overlap', async () => {
    const name = `test.turn:${randomUUID()}`;
    let inside = 0;
    let most = 0;
    const order: number[] = [];
    await Promise.all(Array.from({ length: 12 }, (_, i) => withTurn(db, name, options(), async (trx) => {
      inside += 1;
      most = Math.max(most, inside);
      await trx.raw('SELECT pg_sleep(0.02)');
      order.push(i);
      inside -= 1;
    })));
    expect(most).to.equal(1);
    expect([...order].sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 12 }, (_, i) => i));
  });

  it('while 10 callers wait on a pool of 3, the holder can still get a second connection of the pool', async () => {
    const name = `test.turn:${randomUUID()}`;
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    let entered!: () => void;
    const holding = new Promise<void>((r) => { entered = r; });
    const holder = withTurn(db, name, options(), async () => {
      entered();
      await released;
    });
    await holding;
    const waiters = Array.from({ length: 10 }, () => withTurn(db, name, options(), async (trx) => (await trx.raw('SELECT 1 AS one')).rows[0].one as number));
    await sleep(200);
    // With pg_advisory_xact_lock the waiters would hold both other connections: this would wait
    // for the pool until its deadline (or for ever) instead of answering at once.
    const started = Date.now();
    const other = (await db.raw('SELECT 2 AS two')).rows[0].two as number;
    expect(other).to.equal(2);
    expect(Date.now() - started).to.be.below(1000);
    release();
    await holder;
    expect(await Promise.all(waiters)).to.deep.equal(Array(10).fill(1));
  });

  it('a caller that gets no turn within its wait is refused with busy(), and its function never runs', async () => {
    const name = `test.turn:${randomUUID()}`;
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    const holder = withTurn(db, name, options(), () => released);
    await sleep(50);
    let ran = false;
    const started = Date.now();
    const err = await withTurn(db, name, options(300), async () => { ran = true; }).then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(Busy);
    expect(ran).to.equal(false);
    expect(Date.now() - started).to.be.within(200, 2000);
    release();
    await holder;
  });

  it('a function that throws rolls its transaction back and gives the turn to the next caller', async () => {
    const name = `test.turn:${randomUUID()}`;
    const table = `turn_${randomUUID().replace(/-/g, '')}`;
    await db.schema.createTable(table, (t) => { t.integer('n'); });
    try {
      const err = await withTurn(db, name, options(), async (trx) => {
        await trx.table(table).insert({ n: 1 });
        throw new Error('refused');
      }).then(() => null, (e: Error) => e.message);
      expect(err).to.equal('refused');
      await withTurn(db, name, options(1000), async (trx) => { await trx.table(table).insert({ n: 2 }); });
      expect((await db.table(table).select('n')).map((r) => r.n)).to.deep.equal([2]);
    } finally {
      await db.schema.dropTable(table);
    }
  });

  it('the two ways of naming a lock: hashtext callers exclude each other as the callers that took it before this release did', async () => {
    const name = `test.turn:${randomUUID()}`;
    const trx = await db.transaction();
    try {
      await trx.raw('SELECT pg_advisory_xact_lock(hashtext(?))', [name]);
      const err = await withTurn(db, name, { ...options(200), hash: 'hashtext' }, async () => undefined).then(() => null, (e: unknown) => e);
      expect(err).to.be.instanceOf(Busy);
    } finally {
      await trx.rollback();
    }
    expect(await withTurn(db, name, { ...options(1000), hash: 'hashtext' }, async () => 'turn')).to.equal('turn');
  });
});
