import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent, type ContactListDeleted } from '../../domain/events';
import { CONTACT_EVENT_TYPES } from '../../domain/comms/contacts';
import { withLongStatements } from '../../infra/db';
import type { Projection, ProjectionMigration } from '../runner';

/**
 * Contacts of the communications lists (schema `rm_contacts`, docs/COMMUNICATIONS.md "Contacts"):
 * one row per contact stream. A removed contact keeps its row with `removed_at` set (queries leave
 * it out), so the row's `revision` (of the `contact-<id>` stream) is there for a DELETE's
 * read-your-writes wait and a re-add updates the same row.
 *
 * `list_sizes` holds each list's `contact_count` (contacts present: subscribed or unsubscribed),
 * moved by one when a row enters or leaves the list. An event is applied only when its revision is
 * above the row's, so a re-delivered event moves nothing, and the counts are what a replay from
 * zero gives.
 *
 * A deleted list (ContactListDeleted, from the tenant's list stream) leaves a tombstone in
 * `deleted_lists`: its contacts are marked removed, its `list_sizes` row goes, and a contact event
 * of that list applied later (an add that raced the delete, an unsubscribe link used afterwards)
 * only moves the row's revision (an add never seen before leaves a removed row), so the list
 * stays empty whatever the order the two streams' events reached the log in.
 */

export const CONTACTS_SCHEMA = 'rm_contacts';

const MIGRATIONS: readonly ProjectionMigration[] = [
  {
    name: '001_contacts',
    async up(knex, schema) {
      await knex.schema.withSchema(schema).createTable('contacts', (t) => {
        t.uuid('id').primary();
        t.uuid('tenant_id').notNullable();
        t.uuid('list_id').notNullable();
        t.text('email').notNullable();
        t.text('name');
        t.jsonb('fields').notNullable();
        t.text('status').notNullable();
        t.timestamp('unsubscribed_at', { useTz: true });
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.timestamp('removed_at', { useTz: true });
        t.bigInteger('revision').notNullable();
        // The page of the API (newest first) and the campaign walk (by id), both per list.
        t.index(['list_id', 'created_at', 'id']);
        t.index(['list_id', 'id']);
        t.index(['list_id', 'email']);
      });
      await knex.schema.withSchema(schema).createTable('list_sizes', (t) => {
        t.uuid('list_id').primary();
        t.integer('contact_count').notNullable();
      });
    },
  },
  {
    // Deleted lists (ContactListDeleted): a tombstone per list, so later events of its contacts add nothing.
    name: '002_deleted_lists',
    async up(knex, schema) {
      await knex.schema.withSchema(schema).createTable('deleted_lists', (t) => {
        t.uuid('list_id').primary();
        t.uuid('tenant_id').notNullable();
        t.timestamp('deleted_at', { useTz: true }).notNullable();
      });
    },
  },
];

interface Row { id: string; removed_at: Date | null; revision: string }

async function applyContacts(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const table = () => trx.withSchema(schema).table('contacts');
  const moveCount = async (listId: string, by: number) => {
    await trx.raw(
      `insert into "${schema}"."list_sizes" as s (list_id, contact_count) values (?, ?)
       on conflict (list_id) do update set contact_count = s.contact_count + excluded.contact_count`,
      [listId, by],
    );
  };
  // Deleted lists met in this batch (list id → deleted at, null: not deleted): one look-up per list, not per event.
  const deletedAt = new Map<string, Date | null>();
  const deletionOf = async (listId: string): Promise<Date | null> => {
    if (!deletedAt.has(listId)) {
      const t = await trx.withSchema(schema).table('deleted_lists').where({ list_id: listId }).first('deleted_at') as { deleted_at: Date } | undefined;
      deletedAt.set(listId, t?.deleted_at ?? null);
    }
    return deletedAt.get(listId)!;
  };
  for (const e of events) {
    const event = asDomainEvent(e);
    if (event?.type === 'ContactListDeleted') {
      await deleteList(trx, schema, event.data);
      deletedAt.delete(event.data.listId);
      continue;
    }
    if (event === null || !(CONTACT_EVENT_TYPES as readonly string[]).includes(event.type)) continue;
    const id = (event.data as { contactId: string }).contactId;
    const row = await table().where({ id }).first('id', 'removed_at', 'revision') as Row | undefined;
    // Applied already (a re-delivered batch): the row is at this revision or past it.
    if (row && BigInt(row.revision) >= e.revision) continue;
    const revision = e.revision.toString();
    const deleted = await deletionOf((event.data as { listId: string }).listId);
    if (deleted !== null) {
      // The list is gone: the event only moves the revision (a read-your-writes wait ends), and an
      // add never seen before leaves a removed row. Nothing enters the list or its count.
      if (row) await table().where({ id }).update({ revision });
      else if (event.type === 'ContactAdded') {
        const d = event.data;
        await table().insert({
          id, tenant_id: d.tenantId, list_id: d.listId, email: d.email, name: d.name, fields: JSON.stringify(d.fields), status: 'subscribed',
          unsubscribed_at: null, created_at: d.addedAt, updated_at: d.addedAt, removed_at: deleted, revision,
        });
      }
      continue;
    }
    switch (event.type) {
      case 'ContactAdded': {
        const d = event.data;
        const values = {
          tenant_id: d.tenantId, list_id: d.listId, email: d.email, name: d.name, fields: JSON.stringify(d.fields), status: 'subscribed',
          unsubscribed_at: null, created_at: d.addedAt, updated_at: d.addedAt, removed_at: null, revision,
        };
        if (row) await table().where({ id }).update(values);
        else await table().insert({ id, ...values });
        if (!row || row.removed_at !== null) await moveCount(d.listId, 1);
        break;
      }
      case 'ContactRemoved': {
        const d = event.data;
        if (!row) break; // its ContactAdded was never seen (cannot happen in log order)
        await table().where({ id }).update({ removed_at: d.removedAt, updated_at: d.removedAt, revision });
        if (row.removed_at === null) await moveCount(d.listId, -1);
        break;
      }
      case 'ContactUpdated': {
        const d = event.data;
        if (!row) break;
        if (row.removed_at !== null) await table().where({ id }).update({ revision });
        else await table().where({ id }).update({ name: d.name, fields: JSON.stringify(d.fields), updated_at: d.updatedAt, revision });
        break;
      }
      case 'ContactUnsubscribed': {
        const d = event.data;
        if (!row) break;
        // A removed contact that unsubscribes keeps its tombstone: only the revision moves.
        if (row.removed_at !== null) await table().where({ id }).update({ revision });
        else await table().where({ id }).update({ status: 'unsubscribed', unsubscribed_at: d.unsubscribedAt, updated_at: d.unsubscribedAt, revision });
        break;
      }
    }
  }
}

/**
 * A list deleted: its tombstone, every contact still on it marked removed (at the deletion), its
 * count gone. Applied again, it finds all three done and changes nothing.
 */
async function deleteList(trx: Knex.Transaction, schema: string, d: ContactListDeleted): Promise<void> {
  await trx.withSchema(schema).table('deleted_lists').insert({ list_id: d.listId, tenant_id: d.tenantId, deleted_at: d.deletedAt }).onConflict('list_id').ignore();
  // Every contact of the list, hundreds of thousands maybe: under the long deadline (infra/db.ts LONG_QUERY_TIMEOUT_MS).
  await withLongStatements(trx, () => trx.withSchema(schema).table('contacts').where({ list_id: d.listId }).whereNull('removed_at').update({ removed_at: d.deletedAt }));
  await trx.withSchema(schema).table('list_sizes').where({ list_id: d.listId }).delete();
}

export const contactsProjection: Projection = {
  name: 'contacts',
  migrations: MIGRATIONS,
  handles: [...CONTACT_EVENT_TYPES, 'ContactListDeleted'],
  applyBatch: applyContacts,
};
