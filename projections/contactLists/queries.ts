import type { Knex } from 'knex';
import { fail } from '../../domain/errors';
import { decodeCursor, encodeCursor } from '../messages/queries';
import { isUuid } from '../../domain/ids';
import { CONTACTS_SCHEMA } from '../contacts/projection';
import { CONTACT_LISTS_SCHEMA } from './projection';

/** A contact list as the communications API shows it (docs/COMMUNICATIONS.md "Lists"). */
export interface ContactListView {
  id: string;
  name: string;
  description: string | null;
  /** Contacts on the list now, subscribed or unsubscribed (removed ones are not). */
  contact_count: number;
  created_at: string;
  updated_at: string;
}
export interface ContactListPage { items: ContactListView[]; next_cursor: string | null }

export const LISTS_PAGE = { defaultLimit: 50, maxLimit: 100 } as const;

/** The longest address an `email` filter of the communications routes takes. */
const EMAIL_FILTER_MAX = 320;

/**
 * Adds an exact address filter on `email` to a page query (the address normalised as the rows
 * store it); an empty or over-long one is 400 invalid_query.
 */
export function whereEmail(where: string[], bindings: Knex.RawBinding[], value: string, normalise: (address: string) => string): void {
  const email = normalise(value);
  if (email === '' || email.length > EMAIL_FILTER_MAX) throw fail('invalid_query', 400, `email must be an address of 1 to ${EMAIL_FILTER_MAX} characters`);
  where.push('email = ?');
  bindings.push(email);
}

/** Adds the keyset condition of a newest-first page on (`column`, id) after `cursor` (400 invalid_cursor when it is not one). */
export function whereBefore(where: string[], bindings: Knex.RawBinding[], cursor: string, column: string): void {
  const c = decodeCursor(cursor);
  where.push(`(${column}, id) < (?::timestamptz, ?::uuid)`);
  bindings.push(c.queuedAt, c.id);
}

/** limit: absent = default; otherwise an integer in [1, max] (400 invalid_query). */
export function pageLimit(value: number | undefined, limits: { defaultLimit: number; maxLimit: number }): number {
  if (value === undefined) return limits.defaultLimit;
  if (!Number.isInteger(value) || value < 1 || value > limits.maxLimit) throw fail('invalid_query', 400, `limit must be an integer from 1 to ${limits.maxLimit}`);
  return value;
}

interface Row { id: string; name: string; description: string | null; contact_count: number | null; created_at: Date; updated_at: Date; cursor_at: string }
const viewOf = (r: Row): ContactListView => ({
  id: r.id, name: r.name, description: r.description, contact_count: r.contact_count ?? 0, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString(),
});
// The count is kept by the contacts read model (projections/contacts); a list nobody added to has no row there.
const FROM_LISTS = `"${CONTACT_LISTS_SCHEMA}"."lists" l left join "${CONTACTS_SCHEMA}"."list_sizes" s on s.list_id = l.id`;

/** The tenant's lists, newest first, keyset-paginated on (created_at, id). */
export async function listContactLists(db: Knex, tenantId: string, q: { limit?: number; cursor?: string }): Promise<ContactListPage> {
  const limit = pageLimit(q.limit, LISTS_PAGE);
  const cursor = q.cursor === undefined ? null : decodeCursor(q.cursor);
  const where = ['l.tenant_id = ?', 'l.deleted_at is null'];
  const b: Knex.RawBinding[] = [tenantId];
  if (cursor) {
    where.push('(l.created_at, l.id) < (?::timestamptz, ?::uuid)');
    b.push(cursor.queuedAt, cursor.id);
  }
  b.push(limit + 1);
  const r = await db.raw(
    `select l.id, l.name, l.description, s.contact_count, l.created_at, l.updated_at, to_json(l.created_at) #>> '{}' as cursor_at
     from ${FROM_LISTS} where ${where.join(' and ')} order by l.created_at desc, l.id desc limit ?`,
    b,
  );
  const rows = r.rows as Row[];
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { items: page.map(viewOf), next_cursor: rows.length > limit ? encodeCursor(last.cursor_at, last.id) : null };
}

/** One live list of the tenant (null: not a uuid, never created, deleted, or another tenant's). */
export async function getContactList(db: Knex, tenantId: string, id: string): Promise<ContactListView | null> {
  if (!isUuid(id)) return null;
  const r = await db.raw(
    `select l.id, l.name, l.description, s.contact_count, l.created_at, l.updated_at from ${FROM_LISTS} where l.tenant_id = ? and l.id = ? and l.deleted_at is null`,
    [tenantId, id],
  );
  const row = r.rows[0] as Row | undefined;
  return row ? viewOf(row) : null;
}
