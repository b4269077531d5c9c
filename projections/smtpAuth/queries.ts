import type { Knex } from 'knex';
import { DomainError } from '../../domain/errors';
import { decodeCursor, encodeCursor } from '../messages/queries';
import { SMTP_AUTH_SCHEMA } from './projection';

/** A failed SMTP login of a block, as the owner reads it. */
export interface SmtpAuthFailureItem {
  id: string;
  at: string;
  /** The username as the client gave it (first 128 characters). */
  username: string;
  mechanism: string;
  remoteAddress: string;
  reason: string;
  /** SHA-256 fingerprint of the client certificate presented, if any (mTLS). */
  clientCertificateFingerprint256: string | null;
}

export interface SmtpAuthFailurePage { items: SmtpAuthFailureItem[]; nextCursor: string | null }

export const FAILURES_DEFAULT_LIMIT = 100;
export const FAILURES_MAX_LIMIT = 1000;

/** Newest first, keyset-paginated on (at, id), between `from` and `to` (inclusive). */
export async function listSmtpAuthFailures(
  db: Knex,
  q: { motorBlockId: string; from: Date; to: Date | null; limit?: number | null; cursor?: string | null },
  schema = SMTP_AUTH_SCHEMA,
): Promise<SmtpAuthFailurePage> {
  const limit = q.limit ?? FAILURES_DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > FAILURES_MAX_LIMIT) {
    throw new DomainError({ code: 'invalid_query', status: 400, message: `limit must be an integer between 1 and ${FAILURES_MAX_LIMIT}` });
  }
  const cursor = q.cursor ? decodeCursor(q.cursor) : null;
  const where: string[] = ['motor_block_id = ?', 'at >= ?'];
  const b: Knex.RawBinding[] = [q.motorBlockId, q.from];
  if (q.to) {
    where.push('at <= ?');
    b.push(q.to);
  }
  if (cursor) {
    where.push('(at, id) < (?::timestamptz, ?::uuid)');
    b.push(cursor.queuedAt, cursor.id);
  }
  b.push(limit + 1);
  const r = await db.raw(
    `select *, to_json(at) #>> '{}' as cursor_at from "${schema}"."failures" where ${where.join(' and ')} order by at desc, id desc limit ?`,
    b,
  );
  /* eslint-disable-next-line @typescript-eslint/no-explicit-any */
  const rows = r.rows as any[];
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    items: page.map((x) => ({
      id: x.id, at: (x.at as Date).toISOString(), username: x.username, mechanism: x.mechanism, remoteAddress: x.remote_address,
      reason: x.reason, clientCertificateFingerprint256: x.client_certificate_fingerprint256 ?? null,
    })),
    nextCursor: rows.length > limit && last ? encodeCursor(last.cursor_at, last.id) : null,
  };
}
