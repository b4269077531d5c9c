import type { Knex } from 'knex';
import { isUuid } from '../../domain/ids';
import { suppressionAddress, type SuppressionReason } from '../../domain/comms/suppressions';
import { encodeCursor } from '../messages/queries';
import { pageLimit, whereBefore, whereEmail } from '../contactLists/queries';
import { SUPPRESSIONS_SCHEMA } from './projection';

/** A suppressed address of the tenant (docs/COMMUNICATIONS.md "Suppressions"). */
export interface SuppressionView {
  id: string;
  email: string;
  /** `complaint` once the address complained, else `unsubscribed` once it unsubscribed, else `manual` when the tenant suppressed it, else `hard_bounce`. */
  reason: SuppressionReason;
  /** Hard bounces, complaints, unsubscribes and manual adds recorded for the address. */
  count: number;
  first_at: string;
  last_at: string;
  /** Message and block of the latest bounce or complaint (null when there is none: only unsubscribes or manual adds). */
  last_message_id: string | null;
  last_motor_block_id: string | null;
  /** Reply of the latest hard bounce (null when the address only complained). */
  smtp_code: string | null;
  enhanced_code: string | null;
  /** The tenant's note of its active manual suppression (null without one, or given none). */
  note: string | null;
}
export interface SuppressionPage { items: SuppressionView[]; next_cursor: string | null }

export const SUPPRESSIONS_PAGE = { defaultLimit: 100, maxLimit: 500 } as const;

interface Row {
  id: string; email: string; reason: SuppressionReason; count: number; first_at: Date; last_at: Date; last_message_id: string | null; last_motor_block_id: string | null;
  smtp_code: string | null; enhanced_code: string | null; note: string | null; cursor_at: string;
}

const viewOf = (x: Omit<Row, 'cursor_at'>): SuppressionView => ({
  id: x.id, email: x.email, reason: x.reason, count: x.count, first_at: x.first_at.toISOString(), last_at: x.last_at.toISOString(),
  last_message_id: x.last_message_id, last_motor_block_id: x.last_motor_block_id, smtp_code: x.smtp_code, enhanced_code: x.enhanced_code, note: x.note,
});

/** A suppression's id: the uuid spelling of an md5 (projection.ts), so no version or variant bits to check. */
const SUPPRESSION_ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** One suppression of the account by its id, or null (unknown, another account's, or not an id). */
export async function getSuppression(db: Knex, accountId: string, id: string): Promise<SuppressionView | null> {
  if (!SUPPRESSION_ID_RE.test(id) || !isUuid(accountId)) return null;
  const row = (await db.withSchema(SUPPRESSIONS_SCHEMA).table('suppressions').where({ id, account_id: accountId }).first()) as Omit<Row, 'cursor_at'> | undefined;
  return row ? viewOf(row) : null;
}

/** The account's suppressed addresses, most recently suppressed first (by first_at, then id), keyset-paginated. */
export async function listSuppressions(
  db: Knex, accountId: string, q: { email?: string; reason?: SuppressionReason; limit?: number; cursor?: string },
): Promise<SuppressionPage> {
  const limit = pageLimit(q.limit, SUPPRESSIONS_PAGE);
  const where = ['account_id = ?'];
  const b: Knex.RawBinding[] = [accountId];
  if (q.email !== undefined) whereEmail(where, b, q.email, suppressionAddress);
  if (q.reason !== undefined) {
    where.push('reason = ?');
    b.push(q.reason);
  }
  if (q.cursor !== undefined) whereBefore(where, b, q.cursor, 'first_at');
  b.push(limit + 1);
  const r = await db.raw(
    `select *, to_json(first_at) #>> '{}' as cursor_at from "${SUPPRESSIONS_SCHEMA}"."suppressions"
     where ${where.join(' and ')} order by first_at desc, id desc limit ?`,
    b,
  );
  const rows = r.rows as Row[];
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    items: page.map(viewOf),
    next_cursor: rows.length > limit ? encodeCursor(last.cursor_at, last.id) : null,
  };
}

/** The subset of `emails` (any case) suppressed for the tenant (whatever the reason: a row is a suppression), lower-cased. */
export async function suppressedAmong(db: Knex, tenantId: string, emails: string[]): Promise<Set<string>> {
  const wanted = [...new Set(emails.map(suppressionAddress).filter((e) => e !== ''))];
  if (wanted.length === 0 || !isUuid(tenantId)) return new Set();
  // One array binding, not one per address: a campaign batch can hold thousands.
  const r = await db.raw(`select email from "${SUPPRESSIONS_SCHEMA}"."suppressions" where account_id = ? and email = any(?::text[])`, [tenantId, wanted]);
  return new Set((r.rows as Array<{ email: string }>).map((x) => x.email));
}
