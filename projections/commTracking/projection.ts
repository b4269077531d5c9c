/**
 * Opens and clicks of campaign mail (schema `rm_commtracking`, docs/COMMUNICATIONS.md "Tracking"):
 * one row per `EmailOpened` / `LinkClicked`, keyed by the event id, so a re-delivered batch or a
 * replay from zero adds nothing twice. Rows carry their account (the tenant), so every read is
 * one index range. Pruned with the account's retention by `occurred_at` (workers/retention.ts);
 * a block deleted with its history (tombstone) takes its rows with it.
 */
import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import type { EmailOpened, LinkClicked } from '../../domain/events';
import { isUuid } from '../../domain/ids';
import { suppressionAddress } from '../../domain/comms/suppressions';
import { TOMBSTONE, withTombstones } from '../blockTombstone';
import type { Projection, ProjectionMigration } from '../runner';

export const TRACKING_SCHEMA = 'rm_commtracking';
export const TRACKING_EVENT_TYPES = ['EmailOpened', 'LinkClicked'] as const;

const MIGRATIONS: readonly ProjectionMigration[] = [
  {
    name: '001_tracking_hits',
    async up(knex, schema) {
      await knex.schema.withSchema(schema).createTable('hits', (t) => {
        t.uuid('id').primary();
        t.uuid('account_id').notNullable();
        t.text('type').notNullable();
        t.uuid('campaign_id').notNullable();
        t.uuid('message_id').notNullable();
        t.uuid('motor_block_id').notNullable();
        t.text('email').notNullable();
        t.text('url');
        t.text('user_agent');
        t.text('ip');
        t.timestamp('occurred_at', { useTz: true }).notNullable();
        t.index(['account_id', 'occurred_at', 'id']);
        t.index(['account_id', 'campaign_id', 'occurred_at', 'id']);
        t.index(['account_id', 'message_id', 'occurred_at']);
        t.index(['account_id', 'email', 'occurred_at']);
        t.index(['motor_block_id']);
      });
    },
  },
];

interface Row {
  id: string; account_id: string; type: 'open' | 'click'; campaign_id: string; message_id: string; motor_block_id: string;
  email: string; url: string | null; user_agent: string | null; ip: string | null; occurred_at: string;
}

const str = (v: unknown, max: number): string | null => (typeof v === 'string' && v !== '' ? v.slice(0, max) : null);

/** The row of a hit event, or null when it is not one this read model can place (skipped). */
export function hitRowOf(e: RecordedEvent): Row | null {
  if (e.type !== 'EmailOpened' && e.type !== 'LinkClicked') return null;
  const d = e.data as Partial<EmailOpened & LinkClicked> | null;
  if (!isUuid(e.id) || !d || !isUuid(d.tenantId) || !isUuid(d.motorBlockId) || !isUuid(d.campaignId) || !isUuid(d.messageId)) return null;
  const email = typeof d.recipient === 'string' ? suppressionAddress(d.recipient) : '';
  const url = e.type === 'LinkClicked' ? str(d.url, 4096) : null;
  if (email === '' || (e.type === 'LinkClicked' && url === null)) return null;
  const at = typeof d.occurredAt === 'string' && !Number.isNaN(Date.parse(d.occurredAt)) ? d.occurredAt : e.createdAt.toISOString();
  return {
    id: e.id, account_id: d.tenantId, type: e.type === 'EmailOpened' ? 'open' : 'click', campaign_id: d.campaignId, message_id: d.messageId,
    motor_block_id: d.motorBlockId, email, url, user_agent: str(d.userAgent, 512), ip: str(d.ip, 64), occurred_at: at,
  };
}

export async function applyTrackingEvents(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const rows = events.map(hitRowOf).filter((r): r is Row => r !== null);
  if (rows.length === 0) return;
  await trx.raw(
    `insert into "${schema}"."hits" (id, account_id, type, campaign_id, message_id, motor_block_id, email, url, user_agent, ip, occurred_at)
     select id, account_id, type, campaign_id, message_id, motor_block_id, email, url, user_agent, ip, occurred_at
     from json_to_recordset(?::json) as x(id uuid, account_id uuid, type text, campaign_id uuid, message_id uuid, motor_block_id uuid,
       email text, url text, user_agent text, ip text, occurred_at timestamptz)
     on conflict (id) do nothing`,
    [JSON.stringify(rows)],
  );
}

async function forgetBlock(trx: Knex.Transaction, schema: string, motorBlockId: string): Promise<void> {
  await trx.raw(`delete from "${schema}"."hits" where motor_block_id = ?`, [motorBlockId]);
}

export const commTrackingProjection: Projection = {
  name: 'commtracking',
  migrations: MIGRATIONS,
  handles: [...TRACKING_EVENT_TYPES, TOMBSTONE],
  // Opens follow campaign traffic: batches are spaced like the messages read model's.
  followsMessageTraffic: true,
  applyBatch: withTombstones(applyTrackingEvents, forgetBlock),
};
