import knex, { type Knex } from 'knex';

/**
 * Startup options of every Motor connection to PostgreSQL: JIT compilation off. Motor's statements
 * are index probes, upserts and rollup reads of a few thousand rows that run in well under a
 * millisecond to a few milliseconds; JIT triggers on the planner's cost estimate, which on a table
 * without statistics is inflated enough to compile a 0.2 ms lookup for ~90 ms (measured,
 * docs/PROJECTIONS.md). An `options` parameter in DATABASE_URL replaces this (pg lets the URL win).
 */
export const SESSION_OPTIONS = '-c jit=off';

/** One knex pool per process; read models and (by default) the event store share the database. */
export function createDb(databaseUrl: string, options: { pool?: { min: number; max: number }; applicationName?: string } = {}): Knex {
  return knex({
    client: 'pg',
    connection: { connectionString: databaseUrl, application_name: options.applicationName ?? 'motor', options: SESSION_OPTIONS },
    pool: options.pool ?? { min: 0, max: 10 },
  });
}

/**
 * Runs `fn` in a transaction that first takes the transaction-scoped advisory lock named `name`
 * (by convention the schema being set up). Start-up set-up (CREATE ... IF NOT EXISTS, projection
 * migrations) is not safe when several processes run it at once: two creators both find nothing
 * and one fails on a catalogue unique index ("pg_type_typname_nsp_index"). Under the lock the
 * later processes wait, then find everything made; the DDL commits as the lock is released. The
 * event store's schema does the same on its own connection (infra/eventstore/postgres/schema.ts).
 */
export function withSetupLock<T>(db: Knex, name: string, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  return db.transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`motor.setup:${name}`]);
    // A backend reads its catalogue caches' invalidations at transaction start and when it first
    // locks a relation, not after waiting for an advisory lock: until then it can still hold a
    // cached "no such schema" from before the wait, and CREATE SCHEMA IF NOT EXISTS then fails on
    // pg_namespace_nspname_index. Reading pg_namespace (first lock of it here) brings it up to date.
    await trx.raw('SELECT FROM pg_catalog.pg_namespace LIMIT 0');
    return fn(trx);
  });
}
