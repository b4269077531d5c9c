import type { Knex } from 'knex';
import { fail } from '../../domain/errors';
import { decodeCursor, encodeCursor } from '../messages/queries';
import { CONTACT_LISTS_SCHEMA } from './projection';

/** A contact list as the communications API shows it (docs/COMMUNICATIONS.md "Lists"). */
export interface ContactListView {
  id: string;
  name: string;
  description: string | null;
  /** Contacts on the list. Always 0 today: no route adds contacts yet. */
  contact_count: number;
  created_at: string;
  updated_at: string;
}
export interface ContactListPage { items: ContactListView[]; next_cursor: string | null }

export const LISTS_PAGE = { defaultLimit: 50, maxLimit: 100 } as const;

/** limit: absent = default; otherwise an integer in [1, max] (400 invalid_query). */
export function pageLimit(value: number | undefined, limits: { defaultLimit: number; maxLimit: number }): number {
  if (value === undefined) return limits.defaultLimit;
  if (!Number.isInteger(value) || value < 1 || value > limits.maxLimit) throw fail('invalid_query', 400, `limit must be an integer from 1 to ${limits.maxLimit}`);
  return value;
}

interface Row { id: string; name: string; description: string | null; created_at: Date; updated_at: Date; cursor_at: string }
const viewOf = (r: Row): ContactListView => ({
  id: r.id, name: r.name, description: r.description, contact_count: 0, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString(),
});

/** The tenant's lists, newest first, keyset-paginated on (created_at, id). */
export async function listContactLists(db: Knex, tenantId: string, q: { limit?: number; cursor?: string }): Promise<ContactListPage> {
  const limit = pageLimit(q.limit, LISTS_PAGE);
  const cursor = q.cursor === undefined ? null : decodeCursor(q.cursor);
  const where = ['tenant_id = ?'];
  const b: Knex.RawBinding[] = [tenantId];
  if (cursor) {
    where.push('(created_at, id) < (?::timestamptz, ?::uuid)');
    b.push(cursor.queuedAt, cursor.id);
  }
  b.push(limit + 1);
  const r = await db.raw(
    `select id, name, description, created_at, updated_at, to_json(created_at) #>> '{}' as cursor_at
     from "${CONTACT_LISTS_SCHEMA}"."lists" where ${where.join(' and ')} order by created_at desc, id desc limit ?`,
    b,
  );
  const rows = r.rows as Row[];
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { items: page.map(viewOf), next_cursor: rows.length > limit ? encodeCursor(last.cursor_at, last.id) : null };
}

export async function getContactList(db: Knex, tenantId: string, id: string): Promise<ContactListView | null> {
  const r = await db.withSchema(CONTACT_LISTS_SCHEMA).table('lists').where({ tenant_id: tenantId, id }).first('id', 'name', 'description', 'created_at', 'updated_at') as Row | undefined;
  return r ? viewOf(r) : null;
}
