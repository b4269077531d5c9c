import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent } from '../../domain/events';
import { CONTACT_LIST_EVENT_TYPES } from '../../domain/comms/contactLists';
import type { Projection } from '../runner';

/**
 * Contact lists of the communications product (schema `rm_contactlists`, docs/COMMUNICATIONS.md):
 * one row per list, tenant-scoped. `revision` is the revision of the tenant's `contactLists-<id>`
 * stream the row reflects (read-your-writes: the create waits for it).
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
];

async function applyContactLists(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  for (const e of events) {
    const event = asDomainEvent(e);
    if (event?.type !== 'ContactListCreated') continue;
    const d = event.data;
    // A re-delivered batch finds the row already there.
    await trx.withSchema(schema).table('lists').insert({
      id: d.listId, tenant_id: d.tenantId, name: d.name, description: d.description, created_at: d.createdAt, updated_at: d.createdAt, revision: e.revision.toString(),
    }).onConflict('id').ignore();
  }
}

export const contactListsProjection: Projection = {
  name: 'contactlists',
  migrations: MIGRATIONS,
  handles: CONTACT_LIST_EVENT_TYPES,
  applyBatch: applyContactLists,
};
