import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent } from '../../domain/events';
import type { Projection } from '../runner';

/**
 * Communications templates (schema `rm_templates`, docs/TEMPLATES.md): one row per `template-<id>`
 * stream, tenant-scoped, its `revision` kept for read-your-writes. A deleted template keeps its
 * row with `deleted_at` (the API no longer shows it).
 */

export const TEMPLATES_SCHEMA = 'rm_templates';

const MIGRATIONS = [
  {
    name: '001_templates',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).createTable('templates', (t) => {
        t.uuid('id').primary();
        t.text('tenant_id').notNullable();
        t.text('name').notNullable();
        t.text('subject').notNullable();
        t.text('type').notNullable();
        t.text('body_html');
        t.text('body_text');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.timestamp('deleted_at', { useTz: true });
        t.bigInteger('revision').notNullable();
        t.index(['tenant_id', 'created_at']);
      });
    },
  },
];

async function applyTemplates(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const rows = () => trx.withSchema(schema).table('templates');
  for (const e of events) {
    const event = asDomainEvent(e);
    if (!event) continue;
    const revision = e.revision.toString();
    if (event.type === 'TemplateCreated') {
      const d = event.data;
      await rows().insert({ id: d.templateId, tenant_id: d.tenantId, ...d.content, created_at: d.createdAt, updated_at: d.createdAt, revision }).onConflict('id').ignore();
    } else if (event.type === 'TemplateUpdated') {
      const d = event.data;
      await rows().where({ id: d.templateId }).update({ ...d.content, updated_at: d.updatedAt, revision });
    } else if (event.type === 'TemplateDeleted') {
      await rows().where({ id: event.data.templateId }).update({ deleted_at: event.data.deletedAt, updated_at: event.data.deletedAt, revision });
    }
  }
}

export const templatesProjection: Projection = {
  name: 'templates',
  migrations: MIGRATIONS,
  handles: ['TemplateCreated', 'TemplateUpdated', 'TemplateDeleted'],
  applyBatch: applyTemplates,
};
