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
