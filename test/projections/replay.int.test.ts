import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
import pg from 'pg';
import { createDb } from '../../infra/db.js';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore.js';
import { getMessage } from '../../projections/messages/queries.js';
import { createTestDatabase } from '../support/db.js';
import { appendTraffic, waitVisible } from './fixtures.js';

const ROOT = resolve(__dirname, '../..');

function replay(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/replay.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: '', EVENTSTORE_URL: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('exit', (code) => done({ code, stdout, stderr }));
  });
}

describe('npm run replay (scripts/replay.ts)', function () {
  this.timeout(120_000);
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  let store: PostgresEventStore;

  before(async () => {
    dbh = await createTestDatabase('proj_replay');
    db = createDb(dbh.url);
    store = new PostgresEventStore(dbh.url);
    await store.init();
  });
  after(async () => {
    await store.close();
    await db.destroy();
    await dbh.drop();
  });

  it('rebuilds the named projection and prints a summary line', async () => {
    const { ids, eventCount } = await appendTraffic(store, { count: 200, motorBlockId: '22222222-2222-4222-8222-222222222222' });
    await waitVisible(store, eventCount);
    const r = await replay(['messages', '--batch-size=300'], { DATABASE_URL: dbh.url });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(new RegExp(`^replayed messages: ${eventCount.toLocaleString('en-US')} events \\(`));
    expect(r.stderr).to.include('messages [');
    expect((await getMessage(db, ids[199]))?.id).to.equal(ids[199]);
  });

  it('has no statement deadline: a swap that waits for the live projectors longer than DATABASE_QUERY_TIMEOUT_MS is not cut', async () => {
    // The live runners' lock, held from another session (a live batch that takes its time).
    const holder = new pg.Client({ connectionString: dbh.url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select pg_advisory_xact_lock(hashtext($1))', ['motor.projection:rm_messages']);
      const running = replay(['messages'], { DATABASE_URL: dbh.url, DATABASE_QUERY_TIMEOUT_MS: '300' });
      // Held until the swap has waited for it well past the deadline.
      const waiting = async () => (await holder.query(`select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted`)).rows[0].n > 0;
      for (let i = 0; i < 600 && !(await waiting()); i++) await new Promise((r) => setTimeout(r, 50));
      expect(await waiting(), 'the swap waits for the lock').to.equal(true);
      await new Promise((r) => setTimeout(r, 1000));
      await holder.query('commit');
      const r = await running;
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.match(/^replayed messages: /);
    } finally {
      await holder.end();
    }
  });

  it('lists the known projections for an unknown name', async () => {
    const r = await replay(['nope'], { DATABASE_URL: dbh.url });
    expect(r.code).to.equal(2);
    expect(r.stderr).to.include('unknown projection "nope"');
    expect(r.stderr).to.match(/known projections: .*\bmessages\b/);
  });

  it('refuses an invalid configuration with a clear message before touching any database', async () => {
    const r = await replay(['messages'], { DATABASE_URL: 'mysql://nope' });
    expect(r.code).to.equal(2);
    expect(r.stderr).to.include('DATABASE_URL must use one of postgres, postgresql');
  });
});
