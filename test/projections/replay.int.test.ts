import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
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
