import type { Knex } from 'knex';
import { isUuid } from '../../domain/ids';
import { blockSuppressionAddress, type BlockSuppressionReason } from '../../domain/motorBlock/suppressions';
import { encodeCursor } from '../messages/queries';
import { pageLimit, whereBefore } from '../contactLists/queries';
import { BLOCK_SUPPRESSIONS_SCHEMA } from './projection';

/** A suppressed address of a block (docs/DELIVERY.md "Suppressions"), as the read model keeps it. */
export interface BlockSuppressionRecord {
  /** Lower-cased. */
  address: string;
  reason: BlockSuppressionReason;
  /** When the latest hard bounce or complaint since the address's last lift was recorded. */
  suppressedAt: string;
  /** The message that bounced or was complained about. */
  messageId: string;
  /** The bounce's reply code; null for a complaint. */
  smtpCode: string | null;
  /** The bounce's enhanced status code (5.1.1); null for a complaint or a reply without one. */
  enhancedCode: string | null;
}
export interface BlockSuppressionPage { items: BlockSuppressionRecord[]; nextCursor: string | null }

export const BLOCK_SUPPRESSIONS_PAGE = { defaultLimit: 100, maxLimit: 1000 } as const;

const TABLE = `"${BLOCK_SUPPRESSIONS_SCHEMA}"."suppressions"`;

interface Row { id: string; address: string; reason: BlockSuppressionReason; suppressed_at: Date; message_id: string; smtp_code: string | null; enhanced_code: string | null }

const recordOf = (r: Row): BlockSuppressionRecord => ({
  address: r.address, reason: r.reason, suppressedAt: r.suppressed_at.toISOString(), messageId: r.message_id, smtpCode: r.smtp_code, enhancedCode: r.enhanced_code,
});

/** The block's suppressed addresses, most recently suppressed first (suppressed_at, then id), keyset-paginated. */
export async function listBlockSuppressions(db: Knex, motorBlockId: string, q: { limit?: number; cursor?: string }): Promise<BlockSuppressionPage> {
  const limit = pageLimit(q.limit, BLOCK_SUPPRESSIONS_PAGE);
  const where = ['motor_block_id = ?'];
  const b: Knex.RawBinding[] = [motorBlockId];
  if (q.cursor !== undefined) whereBefore(where, b, q.cursor, 'suppressed_at');
  b.push(limit + 1);
  const r = await db.raw(
    `select *, to_json(suppressed_at) #>> '{}' as cursor_at from ${TABLE} where ${where.join(' and ')} order by suppressed_at desc, id desc limit ?`,
    b,
  );
  const rows = r.rows as Array<Row & { cursor_at: string }>;
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { items: page.map(recordOf), nextCursor: rows.length > limit ? encodeCursor(last.cursor_at, last.id) : null };
}

/** The block's suppression of an address (any case), or null. */
export async function getBlockSuppression(db: Knex, motorBlockId: string, address: string): Promise<BlockSuppressionRecord | null> {
  if (!isUuid(motorBlockId)) return null;
  const row = (await db.raw(`select * from ${TABLE} where motor_block_id = ? and address = ?`, [motorBlockId, blockSuppressionAddress(address)])).rows[0] as Row | undefined;
  return row ? recordOf(row) : null;
}

/** The suppressions among `addresses` (any case) on the block, by lower-cased address: one query, whatever their number. */
export async function blockSuppressionsAmong(db: Knex, motorBlockId: string, addresses: readonly string[]): Promise<Map<string, BlockSuppressionRecord>> {
  const wanted = [...new Set(addresses.map(blockSuppressionAddress).filter((a) => a !== ''))];
  if (wanted.length === 0 || !isUuid(motorBlockId)) return new Map();
  const r = await db.raw(`select * from ${TABLE} where motor_block_id = ? and address = any(?::text[])`, [motorBlockId, wanted]);
  return new Map((r.rows as Row[]).map((row) => [row.address, recordOf(row)]));
}

/** Blocks with at least one suppression and how many: what the delivery worker's cache holds (workers/delivery/suppressions.ts). */
export async function blockSuppressionCounts(db: Knex): Promise<Map<string, number>> {
  const r = await db.raw(`select motor_block_id, suppressions from "${BLOCK_SUPPRESSIONS_SCHEMA}"."block_counts"`);
  return new Map((r.rows as Array<{ motor_block_id: string; suppressions: number }>).map((x) => [x.motor_block_id, x.suppressions]));
}

/**
 * Whether a complaint about the address on the block was recorded since its latest lift: the row
 * shows only the latest fact, and a hard bounce after a complaint must not make that complaint
 * liftable with it.
 */
export async function complainedSinceLift(db: Knex, motorBlockId: string, address: string): Promise<boolean> {
  const schema = `"${BLOCK_SUPPRESSIONS_SCHEMA}"`;
  const r = await db.raw(
    `select exists (
       select 1 from ${schema}."facts" f
       where f.motor_block_id = ? and f.address = ? and f.reason = 'complaint'
         and f.at > coalesce((select max(l.at) from ${schema}."lifts" l where l.motor_block_id = f.motor_block_id and l.address = f.address), '-infinity')
     ) as complained`,
    [motorBlockId, blockSuppressionAddress(address)],
  );
  return r.rows[0].complained === true;
}
