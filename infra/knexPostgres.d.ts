/**
 * knex's PostgreSQL client class, which infra/db.ts extends (knex takes a client class as its
 * `client` option). The package types it only as Knex.Client, without `_query`: the one method
 * every statement of a knex instance goes through (query builders, raw, the BEGIN, COMMIT and
 * ROLLBACK of transactions, migrations), on the node-postgres client the pool lent.
 */
declare module 'knex/lib/dialects/postgres/index.js' {
  import type { Knex } from 'knex';
  import type pg from 'pg';

  export default class Client_PG extends Knex.Client {
    _query(connection: pg.Client, obj: { sql: string; bindings?: unknown[] }): Promise<unknown>;
  }
}
