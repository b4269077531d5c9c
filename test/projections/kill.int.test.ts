import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb } from '../../infra/db.js';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore.js';
import { messagesProjection } from '../../projections/messages/projection.js';
import { rebuild } from '../../projections/runner.js';
import { createTestDatabase } from '../support/db.js';
import { MESSAGE_TABLES, appendTraffic, dumpTables, waitFor } from './fixtures.js';

const ROOT = resolve(__dirname, '../..');
const BLOCK = '22222222-2222-4222-8222-222222222222';

function startProjector(databaseUrl: string): { child: ChildProcess; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>; output: () => string } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/projector.ts', 'messages', '--batch-size=40'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl, EVENTSTORE_URL: '', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.once('exit', (code, signal) => done({ code, signal })));
  return { child, exited, output: () => out };
}

describe('projector killed with SIGKILL mid-stream (child process)', function () {
  this.timeout(180_000);
  let dbh: { url: string; drop: () => Promise<void> };
  let db: Knex;
  let store: PostgresEventStore;

  before(async () => {
    dbh = await createTestDatabase('proj_kill');
    db = createDb(dbh.url);
    store = new PostgresEventStore(dbh.url);
    await store.init();
  });
  after(async () => {
    await store.close();
    await db.destroy();
    await dbh.drop();
  });

  // A live projector is sent only the event types it handles (the store skips the account events
  // of the traffic), so progress is counted in handled events.
  const consumed = async (): Promise<number> => {
    const r = await db.raw('select events_applied::int + events_skipped::int as n from rm_messages.projection_checkpoint').catch(() => ({ rows: [] }));
    return r.rows.length ? (r.rows[0].n as number) : 0;
  };
  const handledInStore = async (): Promise<number> => {
    const r = await db.raw('select count(*)::int as n from events where type = any(?)', [[...messagesProjection.handles]]);
    return r.rows[0].n as number;
  };
  const checkpoint = async (): Promise<string | null> => (await db.raw('select position from rm_messages.projection_checkpoint')).rows[0].position;
  const head = async (): Promise<string> =>
    (await db.raw(`select tx_id::text || ':' || global_position::text as p from events order by tx_id desc, global_position desc limit 1`)).rows[0].p;

  it('resumes from its checkpoint and ends with exactly the rows of a from-scratch rebuild', async () => {
    await appendTraffic(store, { count: 600, motorBlockId: BLOCK, seed: 3 });

    const first = startProjector(dbh.url);
    await waitFor(async () => (await consumed()) > 200, 60_000);
    // Keep appending while the projector works, then kill it without warning.
    const more = appendTraffic(store, { count: 400, motorBlockId: BLOCK, seed: 5, startMs: 5_000_000 });
    await new Promise((r) => setTimeout(r, 150));
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).to.equal('SIGKILL');
    await more;
    const atKill = await consumed();
    expect(atKill).to.be.lessThan(await handledInStore());

    await appendTraffic(store, { count: 300, motorBlockId: BLOCK, seed: 9, startMs: 9_000_000 });
    const total = await handledInStore();
    const last = await head();
    const second = startProjector(dbh.url);
    try {
      // Every handled event applied, and the checkpoint past the log's last entry (a stretch of
      // skipped events at the end is checkpointed within seconds).
      await waitFor(async () => (await consumed()) >= total && (await checkpoint()) === last, 120_000);
    } catch (err) {
      throw new Error(`${(err as Error).message}; consumed ${await consumed()} of ${total}\n${second.output()}`);
    }
    second.child.kill('SIGTERM');
    expect((await second.exited).code).to.equal(0);
    expect(await consumed()).to.equal(total);

    const projected = await dumpTables(db, 'rm_messages', MESSAGE_TABLES);
    const projectedCheckpoint = await checkpoint();
    expect(projected.messages).to.have.length(1300);

    await rebuild(db, store, messagesProjection, { batchSize: 2000 });
    const rebuilt = await dumpTables(db, 'rm_messages', MESSAGE_TABLES);
    expect((await db.raw('select position from rm_messages.projection_checkpoint')).rows[0].position).to.equal(projectedCheckpoint);
    for (const table of MESSAGE_TABLES) {
      const a = new Set(projected[table]);
      const b = new Set(rebuilt[table]);
      const onlyProjected = projected[table].filter((r) => !b.has(r));
      const onlyRebuilt = rebuilt[table].filter((r) => !a.has(r));
      expect({ table, onlyProjected, onlyRebuilt }).to.deep.equal({ table, onlyProjected: [], onlyRebuilt: [] });
      expect(rebuilt[table].length).to.equal(projected[table].length);
    }
  });
});
