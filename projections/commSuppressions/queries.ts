import type { Knex } from 'knex';
import { fail } from '../../domain/errors';
import { suppressionAddress, type SuppressionReason } from '../../domain/comms/suppressions';
import { decodeCursor, encodeCursor } from '../messages/queries';
import { pageLimit } from '../contactLists/queries';
import { SUPPRESSIONS_SCHEMA } from './projection';

/** A suppressed address of the tenant (docs/COMMUNICATIONS.md "Suppressions"). */
export interface SuppressionView {
  id: string;
  email: string;
  /** `complaint` once the address complained, else `hard_bounce`. */
  reason: SuppressionReason;
  /** Hard bounces and complaints recorded for the address. */
  count: number;
  first_at: string;
  last_at: string;
  last_message_id: string;
  last_motor_block_id: string;
  /** Reply of the latest hard bounce (null when the address only complained). */
  smtp_code: string | null;
  enhanced_code: string | null;
}
export interface SuppressionPage { items: SuppressionView[]; next_cursor: string | null }

export const SUPPRESSIONS_PAGE = { defaultLimit: 100, maxLimit: 500 } as const;
/** RFC 5321: a path holds at most 256 octets; anything longer cannot be an address we sent to. */
const EMAIL_MAX = 320;

interface Row {
  id: string; email: string; reason: SuppressionReason; count: number; first_at: Date; last_at: Date; last_message_id: string; last_motor_block_id: string;
  smtp_code: string | null; enhanced_code: string | null; cursor_at: string;
}

/** The account's suppressed addresses, most recently suppressed first (by first_at, then id), keyset-paginated. */
export async function listSuppressions(
  db: Knex, accountId: string, q: { email?: string; reason?: SuppressionReason; limit?: number; cursor?: string },
): Promise<SuppressionPage> {
  const limit = pageLimit(q.limit, SUPPRESSIONS_PAGE);
  const where = ['account_id = ?'];
  const b: Knex.RawBinding[] = [accountId];
  if (q.email !== undefined) {
    const email = suppressionAddress(q.email);
    if (email === '' || email.length > EMAIL_MAX) throw fail('invalid_query', 400, `email must be an address of 1 to ${EMAIL_MAX} characters`);
    where.push('email = ?');
    b.push(email);
  }
  if (q.reason !== undefined) {
    where.push('reason = ?');
    b.push(q.reason);
  }
  if (q.cursor !== undefined) {
    const c = decodeCursor(q.cursor);
    where.push('(first_at, id) < (?::timestamptz, ?::uuid)');
    b.push(c.queuedAt, c.id);
  }
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
    items: page.map((x) => ({
      id: x.id, email: x.email, reason: x.reason, count: x.count, first_at: x.first_at.toISOString(), last_at: x.last_at.toISOString(),
      last_message_id: x.last_message_id, last_motor_block_id: x.last_motor_block_id, smtp_code: x.smtp_code, enhanced_code: x.enhanced_code,
    })),
    next_cursor: rows.length > limit ? encodeCursor(last.cursor_at, last.id) : null,
  };
}
