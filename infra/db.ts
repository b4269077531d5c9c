import knex, { type Knex } from 'knex';

/** One knex pool per process; read models and (by default) the event store share the database. */
export function createDb(databaseUrl: string, options: { pool?: { min: number; max: number }; applicationName?: string } = {}): Knex {
  return knex({
    client: 'pg',
    connection: { connectionString: databaseUrl, application_name: options.applicationName ?? 'motor' },
    pool: options.pool ?? { min: 0, max: 10 },
  });
}
