import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent } from '../../domain/events';
import { CONTACT_EVENT_TYPES } from '../../domain/comms/contacts';
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
  for (const e of events) {
    const event = asDomainEvent(e);
    if (event === null || !(CONTACT_EVENT_TYPES as readonly string[]).includes(event.type)) continue;
    const id = (event.data as { contactId: string }).contactId;
    const row = await table().where({ id }).first('id', 'removed_at', 'revision') as Row | undefined;
    // Applied already (a re-delivered batch): the row is at this revision or past it.
    if (row && BigInt(row.revision) >= e.revision) continue;
    const revision = e.revision.toString();
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

export const contactsProjection: Projection = {
  name: 'contacts',
  migrations: MIGRATIONS,
  handles: CONTACT_EVENT_TYPES,
  applyBatch: applyContacts,
};
