import type { Knex } from 'knex';
import type { RecordedEvent } from '../domain/eventStore';
import { isUuid } from '../domain/ids';

/**
 * Which account and block each accepted message is of, for the projections whose other events
 * name only the message (the outcomes a suppression list is made from). Each such projection keeps
 * its own table of them (`message_owners` of rm_commsuppressions, `message_blocks` of
 * rm_blocksuppressions): a read model is rebuilt on its own and cannot lean on another's rows.
 * Pruned with the account's retention (workers/retention.ts).
 */
export interface MessageOwnerRow { message_id: string; account_id: string; motor_block_id: string; accepted_at: string }

/** The table's columns, keyed by message. */
export function createMessageOwnersTable(knex: Knex, schema: string, table: string): Promise<void> {
  return knex.schema.withSchema(schema).createTable(table, (t) => {
    t.uuid('message_id').primary();
    t.uuid('account_id').notNullable();
    t.uuid('motor_block_id').notNullable();
    t.timestamp('accepted_at', { useTz: true }).notNullable();
    t.index(['account_id', 'accepted_at']);
  });
}

/** The row of a MessageAccepted (read without its content); null for a malformed one, which adds nothing. */
export function messageOwnerOf(e: RecordedEvent): MessageOwnerRow | null {
  const d = e.data as { messageId?: unknown; accountId?: unknown; motorBlockId?: unknown; acceptedAt?: unknown } | null;
  if (!isUuid(d?.messageId) || !isUuid(d.accountId) || !isUuid(d.motorBlockId)) return null;
  return { message_id: d.messageId, account_id: d.accountId, motor_block_id: d.motorBlockId, accepted_at: typeof d.acceptedAt === 'string' ? d.acceptedAt : e.createdAt.toISOString() };
}

/** Inserts the rows, a message already there left as it is (a re-delivered batch adds nothing). */
export async function insertMessageOwners(trx: Knex.Transaction, schema: string, table: string, owners: readonly MessageOwnerRow[]): Promise<void> {
  if (owners.length === 0) return;
  await trx.raw(
    `insert into "${schema}"."${table}" (message_id, account_id, motor_block_id, accepted_at)
     select message_id, account_id, motor_block_id, accepted_at from json_to_recordset(?::json) as x(message_id uuid, account_id uuid, motor_block_id uuid, accepted_at timestamptz)
     on conflict (message_id) do nothing`,
    [JSON.stringify(owners)],
  );
}
