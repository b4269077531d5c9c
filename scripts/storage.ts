/**
 * Storage for operator commands and tests, kept apart from scripts/runtime.ts so the CLI and
 * replay load neither the HTTP app nor its generated routes.
 */
import type { Knex } from 'knex';
import pino from 'pino';
import type { EventStore } from '../domain/eventStore';
import type { Config } from '../infra/config';
import { createDb } from '../infra/db';
import { startEmbeddedPostgres } from '../infra/embedded';
import { createEventStore } from '../infra/eventstore';
import { createLogger } from '../infra/logger';

/**
 * Read-your-writes for the CLI and tests: catch the projection up until `done` holds. One catch-up
 * is not enough because the event log only exposes events below the oldest open transaction of
 * the PostgreSQL cluster, so a write may become visible a moment after it commits.
 */
export async function catchUpUntil(runner: { catchUp(): Promise<number> }, done: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await runner.catchUp();
    if (await done()) return;
    if (Date.now() > deadline) throw new Error(`projection did not catch up within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The database and event store of an operator command (CLI, replay): DATABASE_URL, or like
 * `npm start` the embedded PostgreSQL under MOTOR_DATA_DIR (shared with a running `npm start`,
 * started and stopped here otherwise). close() releases all of it. Statements have
 * DATABASE_QUERY_TIMEOUT_MS to be answered unless `queryTimeoutMs` says otherwise (null: none).
 */
export async function openStorage(
  config: Config, applicationName: string, pool = { min: 0, max: 4 }, queryTimeoutMs: number | null = config.databaseQueryTimeoutMs,
): Promise<{ db: Knex; store: EventStore; close(): Promise<void> }> {
  const embedded = config.databaseUrl ? null : await startEmbeddedPostgres(config.dataDir, createLogger('warn'));
  const databaseUrl = config.databaseUrl ?? embedded!.url;
  // knex's messages as JSON log lines on stderr: stdout is the command's output (the CLI's JSON).
  const logger = createLogger(config.logLevel, { app: applicationName }, pino.destination(2));
  const db = createDb(databaseUrl, { applicationName, pool, queryTimeoutMs, logger });
  const store = await createEventStore({ databaseUrl, eventstoreUrl: config.eventstoreUrl, queryTimeoutMs });
  return {
    db, store,
    async close() {
      await store.close().catch(() => undefined);
      await db.destroy().catch(() => undefined);
      await embedded?.stop().catch(() => undefined);
    },
  };
}
