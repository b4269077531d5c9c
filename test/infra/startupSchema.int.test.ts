import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb, withSetupLock } from '../../infra/db.js';
import { KeyStore } from '../../infra/keys/keyStore.js';
import { initExportFiles } from '../../commands/exports/exports.js';
import { initCheckpoints } from '../../workers/logEnqueuer.js';
import { initWebhookDispatchSchema } from '../../workers/webhooks/dispatcher.js';
import { migrateProjection, schemaFor } from '../../projections/runner.js';
import { allProjections } from '../../projections/index.js';
import { PostgresEventStore } from '../../infra/eventstore/postgres/postgresEventStore.js';
import { createTestDatabase } from '../support/db.js';

/**
 * What every Motor process does to the database when it starts (scripts/runtime.ts createRuntime),
 * run by several processes at once on an empty database: `CREATE ... IF NOT EXISTS` is not safe
 * under concurrency in PostgreSQL (two creators both pass the check, one fails on the catalogue's
 * unique index), so every set-up has to be serialised. Each round starts PROCESSES fresh knex
 * pools (one per simulated process) on a just-emptied schema.
 */
describe('start-up schema set-up, several processes at once', function () {
  this.timeout(180_000);
  const PROCESSES = 8;
  const ROUNDS = 20;
  let dbh: { url: string; drop: () => Promise<void> };
  let admin: Knex;

  before(async () => {
    dbh = await createTestDatabase('startup');
    admin = createDb(dbh.url);
  });
  after(async () => {
    await admin?.destroy();
    await dbh?.drop();
  });

  async function rounds(drop: string[], start: (db: Knex) => Promise<void>, dropSql = (s: string) => `DROP SCHEMA IF EXISTS ${s} CASCADE`): Promise<void> {
    for (let round = 0; round < ROUNDS; round++) {
      for (const s of drop) await admin.raw(dropSql(s));
      const dbs = Array.from({ length: PROCESSES }, () => createDb(dbh.url, { pool: { min: 0, max: 4 } }));
      const results = await Promise.allSettled(dbs.map((db) => start(db)));
      await Promise.all(dbs.map((db) => db.destroy()));
      const errors = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : []));
      expect(errors, `round ${round}`).to.deep.equal([]);
    }
  }

  it('withSetupLock: a process that waited for the lock sees the schema made meanwhile, even one it had looked up before', async () => {
    await admin.raw('DROP SCHEMA IF EXISTS startup_probe CASCADE');
    // One connection, so the failed CREATE below leaves a cached "no such schema" in the backend that waits.
    const waiter = createDb(dbh.url, { pool: { min: 0, max: 1 } });
    try {
      await waiter.raw('CREATE TABLE startup_probe.t (a int)').then(() => expect.fail('schema startup_probe exists'), () => undefined);
      let waiting: Promise<unknown> = Promise.resolve();
      await withSetupLock(admin, 'startup_probe', async (trx) => {
        await trx.raw('CREATE SCHEMA IF NOT EXISTS startup_probe');
        waiting = withSetupLock(waiter, 'startup_probe', (t) => t.raw('CREATE SCHEMA IF NOT EXISTS startup_probe'));
        await new Promise((r) => setTimeout(r, 300));
      });
      await waiting;
    } finally {
      await waiter.destroy();
      await admin.raw('DROP SCHEMA IF EXISTS startup_probe CASCADE');
    }
  });

  it('key store, checkpoints, webhook dispatch and export files: no process fails', async () => {
    await rounds(['motor_keys', 'motor_workers', 'motor_webhook_dispatch', 'motor_exports'], async (db) => {
      await new KeyStore(db, 'k'.repeat(32)).init();
      await initCheckpoints(db);
      await initWebhookDispatchSchema(db);
      await initExportFiles(db);
    });
  });

  it('projection migrations: no process fails, each migration runs once, one knex lock row', async () => {
    const projection = allProjections().find((p) => p.name === 'webhooks')!;
    const schema = schemaFor(projection.name);
    await rounds([schema], (db) => migrateProjection(db, projection));
    const done = await admin.withSchema(schema).table('knex_migrations').select('name');
    expect(done.map((r: { name: string }) => r.name).sort()).to.deep.equal(['000_projection_checkpoint', ...projection.migrations.map((m) => m.name)].sort());
    expect((await admin.withSchema(schema).table('knex_migrations_lock').count('* as n'))[0].n).to.equal('1');
  });

  it('a projection schema left with two knex lock rows (by an earlier release) migrates again', async () => {
    const projection = allProjections().find((p) => p.name === 'exports')!;
    const schema = schemaFor(projection.name);
    await migrateProjection(admin, projection);
    await admin.withSchema(schema).table('knex_migrations_lock').insert({ is_locked: 0 });
    await migrateProjection(admin, projection);
    expect((await admin.withSchema(schema).table('knex_migrations_lock').count('* as n'))[0].n).to.equal('1');
  });

  it('the event store schema (already under its own lock): no process fails', async () => {
    await rounds(['events'], async () => {
      const store = new PostgresEventStore(dbh.url);
      try {
        await store.init();
      } finally {
        await store.close();
      }
    }, (t) => `DROP TABLE IF EXISTS ${t} CASCADE; DROP FUNCTION IF EXISTS motor_append_batch(jsonb, text)`);
  });
});
