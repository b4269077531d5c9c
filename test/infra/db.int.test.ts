import { expect } from 'chai';
import type { Knex } from 'knex';
import pg from 'pg';
import { createLogger } from '../../infra/logger.js';
import { createDb, isDatabaseTimeout, QueryTimeoutError, withLongStatements, withQueryTimeout, withSetupLock } from '../../infra/db.js';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore.js';
import { createTestDatabase, TEST_PG_ADMIN_URL } from '../support/db.js';
import { startPausableProxy, type PausableProxy } from '../support/pausableProxy.js';

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

  /**
   * The kernel's keepalive timer on a TCP connection from this process: /proc/net/tcp's `tr` column is
   * 02 for an established socket with SO_KEEPALIVE waiting to probe, 00 for one without a timer.
   */
  const timerOf = async (localPort: number): Promise<string> => {
    const { readFile } = await import('node:fs/promises');
    const hex = localPort.toString(16).toUpperCase().padStart(4, '0');
    for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
      const row = (await readFile(table, 'utf8')).split('\n').slice(1).map((l) => l.trim().split(/\s+/)).find((f) => f[1]?.endsWith(`:${hex}`) && f[3] === '01');
      if (row) return row[5].split(':')[0];
    }
    throw new Error(`no established TCP connection from port ${localPort}`);
  };
  const localPortOf = (client: pg.Client): number => (client as unknown as { connection: { stream: { localPort: number } } }).connection.stream.localPort;

  it('every connection has TCP keepalive, so a statement without a deadline does not wait for ever on a host that died: knex, the store\'s pool and its LISTEN connection', async () => {
    const scratch = await createTestDatabase('keepalive');
    const db = createDb(scratch.url);
    const store = new PostgresEventStore(scratch.url);
    await store.init();
    const ac = new AbortController();
    try {
      const knexClient = (await db.client.acquireConnection()) as pg.Client;
      const knexTimer = await timerOf(localPortOf(knexClient)).finally(() => db.client.releaseConnection(knexClient));
      expect(knexTimer, 'knex').to.equal('02');
      const pooled = await (store as unknown as { pool: pg.Pool }).pool.connect();
      const pooledTimer = await timerOf(localPortOf(pooled)).finally(() => pooled.release());
      expect(pooledTimer, 'store pool').to.equal('02');
      const sub = (async () => { for await (const _ of store.subscribeToAll({ signal: ac.signal })) void _; })();
      const started = Date.now();
      let listener: pg.Client | null = null;
      while (!(listener = (store as unknown as { listener: pg.Client | null }).listener) && Date.now() - started < 5000) await new Promise((r) => setTimeout(r, 10));
      expect(listener, 'LISTEN connection').to.not.equal(null);
      expect(await timerOf(localPortOf(listener!)), 'LISTEN connection').to.equal('02');
      ac.abort();
      await sub;
      // And the check can fail: a plain node-postgres connection has no keepalive timer.
      const plain = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
      await plain.connect();
      try {
        expect(await timerOf(localPortOf(plain))).to.equal('00');
      } finally {
        await plain.end();
      }
    } finally {
      ac.abort();
      await store.close();
      await db.destroy();
      await scratch.drop();
    }
  });

  it('an options parameter in the URL wins', async () => {
    const u = new URL(TEST_PG_ADMIN_URL);
    u.searchParams.set('options', '-c jit=on');
    expect(await jitOf(u.toString())).to.equal('on');
  });
});

/** knex's own warnings are lines of the process's JSON log, not console output (infra/db.ts knexLog). */
describe('knex messages (int)', () => {
  it('a connection that cannot be made: knex\'s "Acquire connection error" is a JSON log line at warn', async () => {
    const lines: string[] = [];
    const logger = createLogger('info', {}, { write: (line: string) => { lines.push(line); } });
    const db = createDb('postgres://motor@127.0.0.1:1/none', { queryTimeoutMs: 500, logger });
    const logged: unknown[] = [];
    const console = globalThis.console.log;
    globalThis.console.log = (...args: unknown[]) => { logged.push(args); };
    try {
      await db.raw('select 1').then(() => expect.fail('answered'), () => undefined);
    } finally {
      globalThis.console.log = console;
      await db.destroy();
    }
    const warnings = lines.map((l) => JSON.parse(l) as { level: number; msg: string; knex: string }).filter((l) => l.msg === 'knex warning');
    expect(warnings.length).to.be.at.least(1);
    expect(warnings[0].level).to.equal(40);
    expect(warnings[0].knex).to.match(/^Acquire connection error/);
    expect(logged, 'nothing through console.log').to.deep.equal([]);
  });
});

/**
 * A PostgreSQL that stops answering (test/support/pausableProxy.ts: the connection stays open,
 * nothing comes back): every statement of a knex instance fails at its deadline instead of waiting
 * as long as the operating system keeps the connection, and the connection it was sent on is
 * dropped, not lent again behind the unanswered statement.
 */
describe('knex statement deadline (int)', function () {
  this.timeout(20_000);
  const DEADLINE = 500;
  let proxy: PausableProxy;
  let url: string;
  let admin: pg.Client;
  const dbs: Knex[] = [];
  const open = (options: Parameters<typeof createDb>[1] = {}): Knex => {
    const db = createDb(url, { queryTimeoutMs: DEADLINE, pool: { min: 0, max: 1 }, ...options });
    dbs.push(db);
    return db;
  };
  const pidOf = async (db: Knex): Promise<number> => (await db.raw('select pg_backend_pid() as pid')).rows[0].pid as number;
  const failure = (p: Promise<unknown>): Promise<unknown> => p.then(() => 'answered', (err: unknown) => err);

  before(async () => {
    const target = new URL(TEST_PG_ADMIN_URL);
    proxy = await startPausableProxy({ host: target.hostname, port: Number(target.port || 5432) });
    target.hostname = '127.0.0.1';
    target.port = String(proxy.port);
    url = target.toString();
    admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
    await admin.connect();
  });
  afterEach(async () => {
    proxy.resume();
    await Promise.all(dbs.splice(0).map((db) => db.destroy()));
  });
  after(async () => {
    await admin?.end();
    await proxy?.close();
  });

  it('a statement left unanswered fails at the deadline; its connection is dropped, and once the server answers the next statement runs on a new one', async () => {
    const db = open();
    const before = await pidOf(db);
    proxy.pause();
    const started = Date.now();
    const err = await failure(db.raw('select 1'));
    expect(err).to.be.instanceOf(QueryTimeoutError);
    expect((err as Error).message).to.match(/did not answer within 500 ms/);
    expect(Date.now() - started).to.be.within(DEADLINE - 20, DEADLINE + 1000);
    // The server answers again, but not on the connections it had.
    proxy.abandon();
    proxy.resume();
    const t = Date.now();
    const after = await pidOf(db);
    expect(Date.now() - t, 'not queued behind the unanswered statement').to.be.below(DEADLINE);
    expect(after).to.not.equal(before);
    // The abandoned session is gone from the server, not idling in the pool.
    const gone = async () => (await admin.query('select count(*)::int as n from pg_stat_activity where pid = $1', [before])).rows[0].n === 0;
    for (let i = 0; i < 50 && !(await gone()); i++) await new Promise((r) => setTimeout(r, 20));
    expect(await gone()).to.equal(true);
  });

  it('a transaction whose statement goes unanswered fails with the timeout at the deadline (its ROLLBACK is not waited for)', async () => {
    const db = open();
    let started = 0;
    const err = await failure(db.transaction(async (trx) => {
      await trx.raw('select 1 as first');
      proxy.pause();
      started = Date.now();
      await trx.raw('select 2 as second');
    }));
    expect(err).to.be.instanceOf(QueryTimeoutError);
    expect((err as Error).message, 'the error of the statement that went unanswered').to.match(/^select 2 as second - PostgreSQL did not answer within 500 ms/);
    expect(Date.now() - started).to.be.within(DEADLINE - 20, DEADLINE + 1000);
    proxy.resume();
    expect(await db.transaction(async (trx) => (await trx.raw('select 2 as n')).rows[0].n)).to.equal(2);
  });

  it('statements waiting for a connection held by an unanswered one, or for a new connection, give up at the deadline too', async () => {
    const db = open();
    await pidOf(db);
    proxy.pause();
    const started = Date.now();
    const errors = await Promise.all([1, 2, 3].map((n) => failure(db.raw('select ?::int as n', [n]))));
    // The first at its statement's deadline, the others at the pool's wait (knex's KnexTimeoutError).
    expect(errors[0]).to.be.instanceOf(QueryTimeoutError);
    for (const err of errors) expect(isDatabaseTimeout(err), String(err)).to.equal(true);
    expect(Date.now() - started).to.be.below(DEADLINE + 1000);
    proxy.resume();
    expect((await db.raw('select 4 as n')).rows[0].n).to.equal(4);
  });

  it('start-up set-up (withSetupLock) and an instance without a deadline are not cut, on the same pool', async () => {
    const db = open();
    const sleep = `select pg_sleep(${(DEADLINE + 700) / 1000}) as slept`;
    expect(await failure(db.raw(sleep)), 'the instance itself keeps its deadline').to.be.instanceOf(QueryTimeoutError);
    await withSetupLock(db, 'motor_test_deadline', async (trx) => { await trx.raw(sleep); });
    const unbounded = withQueryTimeout(db, null);
    expect(unbounded.client.pool).to.equal(db.client.pool);
    expect((await unbounded.raw(sleep)).rows).to.have.length(1);
    expect(await failure(db.raw(sleep)), 'and the original is unchanged').to.be.instanceOf(QueryTimeoutError);
  });

  it('withLongStatements: what a transaction sends meanwhile is not cut at the deadline, its other statements are', async () => {
    const db = open();
    const sleep = `select pg_sleep(${(DEADLINE + 700) / 1000}) as slept`;
    await db.transaction(async (trx) => {
      await withLongStatements(trx, async () => { await trx.raw(sleep); });
    });
    const err = await failure(db.transaction(async (trx) => {
      await withLongStatements(trx, async () => { await trx.raw('select 1'); });
      await trx.raw(sleep);
    }));
    expect(err).to.be.instanceOf(QueryTimeoutError);
  });
});
