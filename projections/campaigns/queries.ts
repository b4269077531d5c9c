import type { Knex } from 'knex';
import { fail } from '../../domain/errors';
import { isUuid } from '../../domain/ids';
import { CAMPAIGN_STATUSES, type CampaignStatus } from '../../domain/comms/campaigns';
import { pageLimit, whereBefore } from '../contactLists/queries';
import { encodeCursor, searchLogs } from '../messages/queries';
import { trackingTotals } from '../commTracking/queries';
import { CAMPAIGNS_SCHEMA } from './projection';

/** A campaign as the communications API shows it (docs/COMMUNICATIONS.md "Campaigns"). */
export interface CampaignView {
  id: string;
  name: string;
  status: CampaignStatus;
  template_id: string;
  list_id: string;
  motor_block_id: string;
  from: string;
  from_name: string | null;
  track_opens: boolean;
  track_clicks: boolean;
  /** Contacts reached so far: each is accepted, skipped as suppressed, or failed. */
  counts: { recipients: number; accepted: number; skipped_suppressed: number; failed: number };
  tracking: { opens: number; unique_opens: number; clicks: number; unique_clicks: number };
  /** Set while the sender waits for the block's quota (or a usable block); null otherwise. */
  paused_until: string | null;
  /** The time the send was scheduled for (kept after it started or was cancelled); null when it never was. */
  scheduled_at: string | null;
  /** Why a scheduled campaign ended unsent when it came due (the failed check's code, e.g. `template_not_found`); null otherwise. */
  cancel_reason: string | null;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  /** When it ended: sent or cancelled. */
  completed_at: string | null;
}
export interface CampaignPage { items: CampaignView[]; next_cursor: string | null }

export const CAMPAIGNS_PAGE = { defaultLimit: 50, maxLimit: 100 } as const;

interface Row {
  id: string; name: string; status: CampaignStatus; template_id: string; list_id: string; motor_block_id: string; from_address: string; from_name: string | null;
  track_opens: boolean; track_clicks: boolean; recipients: number; accepted: number; skipped_suppressed: number; failed: number;
  paused_until: Date | null; scheduled_at: Date | null; cancel_reason: string | null; created_at: Date; updated_at: Date; started_at: Date | null; completed_at: Date | null; cursor_at: string;
}
const COLUMNS = `id, name, status, template_id, list_id, motor_block_id, from_address, from_name, track_opens, track_clicks, recipients, accepted,
  skipped_suppressed, failed, paused_until, scheduled_at, cancel_reason, created_at, updated_at, started_at, completed_at, to_json(created_at) #>> '{}' as cursor_at`;

const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString());

async function viewOf(db: Knex, tenantId: string, r: Row): Promise<CampaignView> {
  const t = await trackingTotals(db, tenantId, r.id);
  return {
    id: r.id, name: r.name, status: r.status, template_id: r.template_id, list_id: r.list_id, motor_block_id: r.motor_block_id,
    from: r.from_address, from_name: r.from_name, track_opens: r.track_opens, track_clicks: r.track_clicks,
    counts: { recipients: r.recipients, accepted: r.accepted, skipped_suppressed: r.skipped_suppressed, failed: r.failed },
    tracking: { opens: t.opens, unique_opens: t.uniqueOpens, clicks: t.clicks, unique_clicks: t.uniqueClicks },
    paused_until: iso(r.paused_until), scheduled_at: iso(r.scheduled_at), cancel_reason: r.cancel_reason, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString(),
    started_at: iso(r.started_at), completed_at: iso(r.completed_at),
  };
}

/** The tenant's campaigns, newest first, keyset-paginated on (created_at, id); `status` filters. */
export async function listCampaigns(db: Knex, tenantId: string, q: { status?: string; limit?: number; cursor?: string }): Promise<CampaignPage> {
  const limit = pageLimit(q.limit, CAMPAIGNS_PAGE);
  if (q.status !== undefined && !(CAMPAIGN_STATUSES as readonly string[]).includes(q.status)) {
    throw fail('invalid_query', 400, `status must be one of ${CAMPAIGN_STATUSES.join(', ')}`);
  }
  const where = ['tenant_id = ?', 'deleted_at is null'];
  const b: Knex.RawBinding[] = [tenantId];
  if (q.status !== undefined) {
    where.push('status = ?');
    b.push(q.status);
  }
  if (q.cursor !== undefined) whereBefore(where, b, q.cursor, 'created_at');
  b.push(limit + 1);
  const r = await db.raw(`select ${COLUMNS} from "${CAMPAIGNS_SCHEMA}"."campaigns" where ${where.join(' and ')} order by created_at desc, id desc limit ?`, b);
  const rows = r.rows as Row[];
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { items: await Promise.all(page.map((row) => viewOf(db, tenantId, row))), next_cursor: rows.length > limit ? encodeCursor(last.cursor_at, last.id) : null };
}

/** One campaign of the tenant, or null (none, or another tenant's). */
export async function findCampaign(db: Knex, tenantId: string, id: string): Promise<CampaignView | null> {
  if (!isUuid(id) || !isUuid(tenantId)) return null;
  const r = await db.raw(`select ${COLUMNS} from "${CAMPAIGNS_SCHEMA}"."campaigns" where id = ? and tenant_id = ? and deleted_at is null`, [id, tenantId]);
  const row = (r.rows as Row[])[0];
  return row ? viewOf(db, tenantId, row) : null;
}

/** Ids of the campaigns sending or scheduled (the sender's resumer), in id order after `afterId`, at most `limit`. */
export async function campaignIdsUnderWay(db: Knex, afterId: string | null = null, limit = 1000): Promise<string[]> {
  const q = db.withSchema(CAMPAIGNS_SCHEMA).table('campaigns').whereIn('status', ['sending', 'scheduled']);
  if (afterId !== null) q.where('id', '>', afterId);
  const rows = await q.orderBy('id').limit(limit).select('id') as Array<{ id: string }>;
  return rows.map((r) => r.id);
}

/** Ids of the tenant's campaigns scheduled or sending to `listId` (what keeps a list from being deleted), in id order. */
export async function campaignsUnderWayOnList(db: Knex, tenantId: string, listId: string): Promise<string[]> {
  const rows = await db.withSchema(CAMPAIGNS_SCHEMA).table('campaigns')
    .where({ tenant_id: tenantId, list_id: listId }).whereIn('status', ['sending', 'scheduled']).whereNull('deleted_at')
    .orderBy('id').select('id') as Array<{ id: string }>;
  return rows.map((r) => r.id);
}

/** One message of a campaign (one per contact), as `GET /campaigns/{id}/messages` shows it. */
export interface CampaignMessageView {
  message_id: string;
  email: string;
  /** The message's current outcome: queued, processed, deferred, delivered, bounced, failed, complained, ... */
  status: string;
  smtp_code: string | null;
  smtp_response: string | null;
  queued_at: string;
  delivered_at: string | null;
  bounced_at: string | null;
}
export interface CampaignMessagePage { items: CampaignMessageView[]; next_cursor: string | null }
export const CAMPAIGN_MESSAGES_PAGE = { defaultLimit: 100, maxLimit: 500 } as const;

/**
 * What became of each message of a campaign (docs/COMMUNICATIONS.md "Campaign messages"): the
 * messages read model's rows of the campaign's block whose `metadata.campaign_id` is the campaign,
 * newest first, with the logs route's status filter and cursor. `campaign` is the tenant's (the
 * caller checked it).
 */
export async function campaignMessages(
  db: Knex, campaign: Pick<CampaignView, 'id' | 'motor_block_id'>, q: { status?: string; limit?: number; cursor?: string },
): Promise<CampaignMessagePage> {
  const limit = q.limit ?? CAMPAIGN_MESSAGES_PAGE.defaultLimit;
  if (!Number.isInteger(limit) || limit < 1 || limit > CAMPAIGN_MESSAGES_PAGE.maxLimit) {
    throw fail('invalid_query', 400, `limit must be an integer between 1 and ${CAMPAIGN_MESSAGES_PAGE.maxLimit}`);
  }
  const page = await searchLogs(db, { motorBlockId: campaign.motor_block_id, query: `metadata.campaign_id:${campaign.id}`, status: q.status ?? null, limit, cursor: q.cursor ?? null });
  return {
    items: page.items.map((m) => ({
      message_id: m.id, email: m.recipients[0] ?? '', status: m.currentOutcome, smtp_code: m.smtpCode, smtp_response: m.smtpResponse,
      queued_at: m.queuedAt.toISOString(), delivered_at: iso(m.deliveredAt), bounced_at: iso(m.bouncedAt),
    })),
    next_cursor: page.nextCursor,
  };
}
