import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent } from '../../domain/events';
import { CONTACT_LIST_EVENT_TYPES } from '../../domain/comms/contactLists';
import type { Projection } from '../runner';

/**
 * Contact lists of the communications product (schema `rm_contactlists`, docs/COMMUNICATIONS.md):
 * one row per list, tenant-scoped. `revision` is the revision of the tenant's `contactLists-<id>`
 * stream the row reflects (read-your-writes: a create, rename or delete waits for it). An event
 * changes the row only when its revision is above the row's, so a re-delivered batch or a replay
 * from zero ends in the same rows. A deleted list keeps its row, with `deleted_at` set (queries
 * leave it out), so a replayed ContactListCreated cannot bring it back.
 */

export const CONTACT_LISTS_SCHEMA = 'rm_contactlists';

const MIGRATIONS = [
  {
    name: '001_lists',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).createTable('lists', (t) => {
        t.uuid('id').primary();
        t.text('tenant_id').notNullable();
        t.text('name').notNullable();
        t.text('description');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.bigInteger('revision').notNullable();
        t.index(['tenant_id', 'created_at', 'id']);
      });
    },
  },
  {
    // Renames and deletes (ContactListUpdated, ContactListDeleted): a deleted list is a tombstone.
    name: '002_update_delete',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).alterTable('lists', (t) => {
        t.timestamp('deleted_at', { useTz: true });
      });
    },
  },
];

async function applyContactLists(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const rows = () => trx.withSchema(schema).table('lists');
  for (const e of events) {
    const event = asDomainEvent(e);
    if (event === null || !(CONTACT_LIST_EVENT_TYPES as readonly string[]).includes(event.type)) continue;
    const revision = e.revision.toString();
    // Only an event past the row's revision changes it: a replayed one is ignored.
    const later = (listId: string) => rows().where({ id: listId }).where('revision', '<', revision);
    switch (event.type) {
      case 'ContactListCreated': {
        const d = event.data;
        await rows().insert({
          id: d.listId, tenant_id: d.tenantId, name: d.name, description: d.description, created_at: d.createdAt, updated_at: d.createdAt, revision,
        }).onConflict('id').ignore();
        break;
      }
      case 'ContactListUpdated': {
        const d = event.data;
        await later(d.listId).update({ name: d.name, description: d.description, updated_at: d.updatedAt, revision });
        break;
      }
      case 'ContactListDeleted': {
        const d = event.data;
        await later(d.listId).update({ deleted_at: d.deletedAt, updated_at: d.deletedAt, revision });
        break;
      }
    }
  }
}

export const contactListsProjection: Projection = {
  name: 'contactlists',
  migrations: MIGRATIONS,
  handles: CONTACT_LIST_EVENT_TYPES,
  applyBatch: applyContactLists,
};
