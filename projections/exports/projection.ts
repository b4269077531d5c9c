import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent } from '../../domain/events';
import type { Projection } from '../runner';
import { TOMBSTONE, withTombstones } from '../blockTombstone';

/**
 * Export jobs as the API shows them (schema `rm_exports`, docs/EXPORTS.md): one row per
 * `export-<id>` stream, its `revision` kept for read-your-writes. The files themselves are the
 * export worker's state (motor_exports.files), not part of this read model. A block deleted with
 * its history loses its jobs here (the worker then drops their files).
 */

export const EXPORTS_SCHEMA = 'rm_exports';

const MIGRATIONS = [
  {
    name: '001_jobs',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).createTable('jobs', (t) => {
        t.uuid('id').primary();
        t.uuid('motor_block_id').notNullable();
        t.uuid('account_id').notNullable();
        t.text('status').notNullable();
        t.timestamp('window_from', { useTz: true }).notNullable();
        t.timestamp('window_to', { useTz: true }).notNullable();
        t.text('query');
        t.text('status_filter');
        t.boolean('include_pii').notNullable();
        t.integer('rows');
        t.bigInteger('bytes');
        t.boolean('truncated');
        t.text('error');
        t.timestamp('requested_at', { useTz: true }).notNullable();
        t.timestamp('completed_at', { useTz: true });
        t.timestamp('expires_at', { useTz: true });
        t.bigInteger('revision').notNullable();
        t.index(['motor_block_id', 'requested_at']);
      });
    },
  },
];

async function applyJobs(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const jobs = () => trx.withSchema(schema).table('jobs');
  for (const e of events) {
    const event = asDomainEvent(e);
    if (!event) continue;
    const revision = e.revision.toString();
    if (event.type === 'ExportRequested') {
      const d = event.data;
      await jobs().insert({
        id: d.jobId, motor_block_id: d.motorBlockId, account_id: d.accountId, status: 'queued', window_from: d.from, window_to: d.to,
        query: d.query, status_filter: d.status, include_pii: d.includePII, requested_at: d.requestedAt, revision,
      }).onConflict('id').ignore();
    } else if (event.type === 'ExportCompleted') {
      const d = event.data;
      await jobs().where({ id: d.jobId }).update({ status: 'completed', rows: d.rows, bytes: d.bytes, truncated: d.truncated, completed_at: d.completedAt, expires_at: d.expiresAt, revision });
    } else if (event.type === 'ExportFailed') {
      const d = event.data;
      await jobs().where({ id: d.jobId }).update({ status: 'failed', error: d.reason, completed_at: d.failedAt, revision });
    }
  }
}

export const exportsProjection: Projection = {
  name: 'exports',
  migrations: MIGRATIONS,
  handles: ['ExportRequested', 'ExportCompleted', 'ExportFailed', TOMBSTONE],
  applyBatch: withTombstones(applyJobs, async (trx, schema, motorBlockId) => {
    await trx.withSchema(schema).table('jobs').where({ motor_block_id: motorBlockId }).delete();
  }),
};
