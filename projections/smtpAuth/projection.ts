import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent } from '../../domain/events';
import type { Projection } from '../runner';
import { TOMBSTONE, withTombstones } from '../blockTombstone';

/**
 * Failed SMTP logins as the block's owner sees them (schema `rm_smtpauth`, docs/SMTP.md): one row
 * per SmtpAuthFailed event of a known block (stream `smtpAuth-<motorBlockId>`). Attempts with an
 * unknown username (`smtpAuth-unknown`) belong to no block and stay in the log only. Replayable:
 * the row id is the event id. A deleted block's rows go with its history: the deletion job removes
 * `smtpAuth-<block>` and the tombstone deletes the rows (projections/blockTombstone.ts, docs/BLOCKS.md).
 */

export const SMTP_AUTH_SCHEMA = 'rm_smtpauth';
export const SMTP_AUTH_EVENTS = ['SmtpAuthFailed'] as const;

const MIGRATIONS = [
  {
    name: '001_failures',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).createTable('failures', (t) => {
        t.uuid('id').primary();
        t.uuid('motor_block_id').notNullable();
        t.timestamp('at', { useTz: true }).notNullable();
        t.text('username').notNullable();
        t.text('mechanism').notNullable();
        t.text('remote_address').notNullable();
        t.text('reason').notNullable();
        t.text('client_certificate_fingerprint256');
        // Newest first per block, keyset on (at, id).
        t.index(['motor_block_id', 'at', 'id']);
      });
    },
  },
];

export const smtpAuthProjection: Projection = {
  name: 'smtpauth',
  migrations: MIGRATIONS,
  handles: [...SMTP_AUTH_EVENTS, TOMBSTONE],
  applyBatch: withTombstones(applyFailures, async (trx, schema, motorBlockId) => {
    await trx.withSchema(schema).table('failures').where({ motor_block_id: motorBlockId }).delete();
  }),
};

async function applyFailures(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const rows = [];
  for (const e of events) {
    const event = asDomainEvent(e);
    if (event?.type !== 'SmtpAuthFailed' || !event.data.motorBlockId) continue;
    const d = event.data;
    rows.push({
      id: e.id, motor_block_id: d.motorBlockId, at: d.at, username: d.username, mechanism: d.mechanism,
      remote_address: d.remoteAddress, reason: d.reason, client_certificate_fingerprint256: d.clientCertificateFingerprint256 ?? null,
    });
  }
  if (rows.length > 0) await trx.withSchema(schema).table('failures').insert(rows).onConflict('id').ignore();
}
