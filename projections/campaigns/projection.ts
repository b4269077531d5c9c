import type { Knex } from 'knex';
import type { RecordedEvent } from '../../domain/eventStore';
import { asDomainEvent } from '../../domain/events';
import { CAMPAIGN_EVENT_TYPES, isCampaignEvent } from '../../domain/comms/campaigns';
import type { Projection } from '../runner';

/**
 * Campaigns of the communications product (schema `rm_campaigns`, docs/COMMUNICATIONS.md
 * "Campaigns"): one row per `campaign-<id>` stream. `revision` is the stream revision the row
 * reflects: read-your-writes waits on it, and an event at or below it is a replay and changes
 * nothing, so a re-delivered batch or a rebuild from zero ends in the same row.
 */

export const CAMPAIGNS_SCHEMA = 'rm_campaigns';

const MIGRATIONS = [
  {
    name: '001_campaigns',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).createTable('campaigns', (t) => {
        t.uuid('id').primary();
        t.uuid('tenant_id').notNullable();
        t.text('name').notNullable();
        t.text('status').notNullable();
        t.uuid('template_id').notNullable();
        t.uuid('list_id').notNullable();
        t.uuid('motor_block_id').notNullable();
        t.text('from_address').notNullable();
        t.text('from_name');
        t.boolean('track_opens').notNullable();
        t.boolean('track_clicks').notNullable();
        t.integer('recipients').notNullable().defaultTo(0);
        t.integer('accepted').notNullable().defaultTo(0);
        t.integer('skipped_suppressed').notNullable().defaultTo(0);
        t.integer('failed').notNullable().defaultTo(0);
        t.uuid('last_contact_id');
        t.timestamp('paused_until', { useTz: true });
        t.text('paused_reason');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.timestamp('started_at', { useTz: true });
        t.timestamp('completed_at', { useTz: true });
        t.bigInteger('revision').notNullable();
        t.index(['tenant_id', 'created_at', 'id']);
        t.index(['tenant_id', 'status', 'created_at', 'id']);
      });
      // The sender's resumer finds the campaigns under way without a scan.
      await knex.raw(`CREATE INDEX campaigns_sending ON "${schema}".campaigns (id) WHERE status = 'sending'`);
    },
  },
  {
    // Scheduling, editing and deleting (CampaignScheduled, CampaignUpdated, CampaignScheduledStartFailed, CampaignDeleted).
    name: '002_schedule_edit_delete',
    async up(knex: Knex, schema: string) {
      await knex.schema.withSchema(schema).alterTable('campaigns', (t) => {
        t.timestamp('scheduled_at', { useTz: true });
        t.text('cancel_reason');
        // A deleted campaign keeps its row (a tombstone): a replayed CampaignCreated must not bring it back.
        t.timestamp('deleted_at', { useTz: true });
      });
      // The sweep of the sender finds the campaigns sending or scheduled without a scan.
      await knex.raw(`DROP INDEX "${schema}".campaigns_sending`);
      await knex.raw(`CREATE INDEX campaigns_under_way ON "${schema}".campaigns (id) WHERE status IN ('sending', 'scheduled')`);
    },
  },
];

/** Read-model columns of the fields a CampaignUpdated may change. */
const COLUMN_OF = {
  name: 'name', templateId: 'template_id', listId: 'list_id', motorBlockId: 'motor_block_id', from: 'from_address', fromName: 'from_name',
  trackOpens: 'track_opens', trackClicks: 'track_clicks',
} as const;

async function applyCampaigns(trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> {
  const rows = () => trx.withSchema(schema).table('campaigns');
  for (const e of events) {
    const event = asDomainEvent(e);
    if (!isCampaignEvent(event)) continue;
    const revision = e.revision.toString();
    // Only an event past the row's revision changes it: a replayed one is ignored.
    const update = (id: string, values: Record<string, unknown>) => rows().where({ id }).andWhere('revision', '<', revision).update({ ...values, revision });
    switch (event.type) {
      case 'CampaignCreated': {
        const d = event.data;
        await rows().insert({
          id: d.campaignId, tenant_id: d.tenantId, name: d.name, status: 'draft', template_id: d.templateId, list_id: d.listId, motor_block_id: d.motorBlockId,
          from_address: d.from, from_name: d.fromName, track_opens: d.trackOpens, track_clicks: d.trackClicks,
          created_at: d.createdAt, updated_at: d.createdAt, revision,
        }).onConflict('id').ignore();
        break;
      }
      case 'CampaignSendStarted':
        await update(event.data.campaignId, { status: 'sending', started_at: event.data.startedAt, updated_at: event.data.startedAt });
        break;
      case 'CampaignProgressed': {
        const d = event.data;
        await update(d.campaignId, {
          last_contact_id: d.lastContactId, recipients: d.counts.recipients, accepted: d.counts.accepted, skipped_suppressed: d.counts.skippedSuppressed,
          failed: d.counts.failed, paused_until: d.resumeAt ?? null, paused_reason: d.resumeAt ? (d.pausedReason ?? null) : null, updated_at: d.at,
        });
        break;
      }
      case 'CampaignSendCompleted': {
        const d = event.data;
        await update(d.campaignId, {
          status: 'sent', last_contact_id: d.lastContactId, recipients: d.counts.recipients, accepted: d.counts.accepted, skipped_suppressed: d.counts.skippedSuppressed,
          failed: d.counts.failed, paused_until: null, paused_reason: null, completed_at: d.completedAt, updated_at: d.completedAt,
        });
        break;
      }
      case 'CampaignCancelled':
        await update(event.data.campaignId, { status: 'cancelled', paused_until: null, paused_reason: null, completed_at: event.data.cancelledAt, updated_at: event.data.cancelledAt });
        break;
      case 'CampaignScheduled':
        await update(event.data.campaignId, { status: 'scheduled', scheduled_at: event.data.scheduledAt, updated_at: event.data.at });
        break;
      case 'CampaignUpdated': {
        const changes = Object.entries(event.data.changes).map(([k, v]) => [COLUMN_OF[k as keyof typeof COLUMN_OF], v] as const).filter(([column]) => column !== undefined);
        await update(event.data.campaignId, { ...Object.fromEntries(changes), updated_at: event.data.at });
        break;
      }
      case 'CampaignScheduledStartFailed':
        await update(event.data.campaignId, { status: 'cancelled', cancel_reason: event.data.code, completed_at: event.data.at, updated_at: event.data.at });
        break;
      case 'CampaignDeleted':
        await update(event.data.campaignId, { deleted_at: event.data.at, updated_at: event.data.at });
        break;
    }
  }
}

export const campaignsProjection: Projection = {
  name: 'campaigns',
  migrations: MIGRATIONS,
  handles: CAMPAIGN_EVENT_TYPES,
  // The template snapshot of CampaignSendStarted is read by the sender only.
  ignoresData: ['template'],
  applyBatch: applyCampaigns,
};
