import type { Knex } from 'knex';
import { fail } from '../../domain/errors';
import { isUuid } from '../../domain/ids';
import { suppressionAddress } from '../../domain/comms/suppressions';
import { encodeCursor } from '../messages/queries';
import { pageLimit, whereBefore, whereEmail } from '../contactLists/queries';
import { TRACKING_SCHEMA } from './projection';

export type TrackingEventType = 'open' | 'click';

/** An open or a click of campaign mail (docs/COMMUNICATIONS.md "Tracking"). */
export interface TrackingEventView {
  /** The event's id. */
  id: string;
  type: TrackingEventType;
  campaign_id: string;
  message_id: string;
  motor_block_id: string;
  /** The recipient, lower-cased. */
  email: string;
  /** The destination of a click; null for an open. */
  url: string | null;
  /** At most 512 characters; null when the request had none. */
  user_agent: string | null;
  /** Truncated: IPv4 to its /24 (`203.0.113.0`), IPv6 to its /48 (`2001:db8:1::`). */
  ip: string | null;
  occurred_at: string;
}
export interface TrackingEventPage { items: TrackingEventView[]; next_cursor: string | null }

export const TRACKING_PAGE = { defaultLimit: 100, maxLimit: 500 } as const;

export interface TrackingFilter {
  type?: TrackingEventType;
  campaignId?: string;
  messageId?: string;
  email?: string;
  /** Inclusive bounds on occurred_at (already clamped to the retention window by the caller). */
  from: Date;
  to: Date | null;
  limit?: number;
  cursor?: string;
}

interface Row {
  id: string; type: TrackingEventType; campaign_id: string; message_id: string; motor_block_id: string; email: string; url: string | null;
  user_agent: string | null; ip: string | null; occurred_at: Date; cursor_at: string;
}

const uuidParam = (name: string, v: string): string => {
  if (!isUuid(v)) throw fail('invalid_query', 400, `${name} must be a uuid`);
  return v.toLowerCase();
};

/** The tenant's opens and clicks, newest first by (occurred_at, id), keyset-paginated. */
export async function listTrackingEvents(db: Knex, accountId: string, q: TrackingFilter): Promise<TrackingEventPage> {
  const limit = pageLimit(q.limit, TRACKING_PAGE);
  const where = ['account_id = ?', 'occurred_at >= ?'];
  const b: Knex.RawBinding[] = [accountId, q.from];
  if (q.to !== null) {
    where.push('occurred_at <= ?');
    b.push(q.to);
  }
  if (q.type !== undefined) {
    if (q.type !== 'open' && q.type !== 'click') throw fail('invalid_query', 400, 'type must be open or click');
    where.push('type = ?');
    b.push(q.type);
  }
  if (q.campaignId !== undefined) {
    where.push('campaign_id = ?');
    b.push(uuidParam('campaign_id', q.campaignId));
  }
  if (q.messageId !== undefined) {
    where.push('message_id = ?');
    b.push(uuidParam('message_id', q.messageId));
  }
  if (q.email !== undefined) whereEmail(where, b, q.email, suppressionAddress);
  if (q.cursor !== undefined) whereBefore(where, b, q.cursor, 'occurred_at');
  b.push(limit + 1);
  const r = await db.raw(
    `select id, type, campaign_id, message_id, motor_block_id, email, url, user_agent, ip, occurred_at, to_json(occurred_at) #>> '{}' as cursor_at
     from "${TRACKING_SCHEMA}"."hits" where ${where.join(' and ')} order by occurred_at desc, id desc limit ?`,
    b,
  );
  const rows = r.rows as Row[];
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    items: page.map((x) => ({
      id: x.id, type: x.type, campaign_id: x.campaign_id, message_id: x.message_id, motor_block_id: x.motor_block_id, email: x.email,
      url: x.url, user_agent: x.user_agent, ip: x.ip, occurred_at: x.occurred_at.toISOString(),
    })),
    next_cursor: rows.length > limit ? encodeCursor(last.cursor_at, last.id) : null,
  };
}

export interface TrackingTotals { opens: number; uniqueOpens: number; clicks: number; uniqueClicks: number }

/**
 * A campaign's opens and clicks: every hit, and the messages (one per recipient) with at least
 * one. Rows past the account's retention are pruned, so old campaigns count only what is kept.
 */
export async function trackingTotals(db: Knex, tenantId: string, campaignId: string): Promise<TrackingTotals> {
  if (!isUuid(tenantId) || !isUuid(campaignId)) return { opens: 0, uniqueOpens: 0, clicks: 0, uniqueClicks: 0 };
  const r = await db.raw(
    `select count(*) filter (where type = 'open')::int as opens, count(distinct message_id) filter (where type = 'open')::int as unique_opens,
       count(*) filter (where type = 'click')::int as clicks, count(distinct message_id) filter (where type = 'click')::int as unique_clicks
     from "${TRACKING_SCHEMA}"."hits" where account_id = ? and campaign_id = ?`,
    [tenantId, campaignId],
  );
  const x = r.rows[0] as { opens: number; unique_opens: number; clicks: number; unique_clicks: number };
  return { opens: x.opens, uniqueOpens: x.unique_opens, clicks: x.clicks, uniqueClicks: x.unique_clicks };
}
