import type { Knex } from 'knex';

/**
 * The rows of `table` whose uuid `column` is one of `ids`: one index probe per id, whatever the
 * table's statistics say.
 *
 * `column = any($1)` is planned from column statistics. On a table that has never been analyzed
 * (a read model rebuilt into a fresh schema, or autovacuum off or behind) the planner guesses 0.5 %
 * of the table per id, so a batch of a few dozen ids already plans a sequential scan, repeated
 * every batch: 1.1 M state rows cost 110 ms per lookup instead of 0.3 ms (docs/PROJECTIONS.md).
 * A LATERAL subquery kept from being flattened (OFFSET 0) can only run as a nested loop over the
 * ids, and a single equality is estimated small enough for the index.
 */
export async function selectByIds<T>(trx: Knex.Transaction | Knex, table: string, column: string, ids: readonly string[]): Promise<T[]> {
  if (ids.length === 0) return [];
  return (await trx.raw(selectByIdsSql(table, column), [ids as string[]])).rows as T[];
}

/** The statement of selectByIds, with one bind parameter: the uuid[] of ids. */
export const selectByIdsSql = (table: string, column: string): string =>
  `select r.* from unnest(?::uuid[]) as k(id) cross join lateral (select * from ${table} as t where t."${column}" = k.id offset 0) as r`;
