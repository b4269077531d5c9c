import type { Knex } from 'knex';
import { fail } from '../../domain/errors';
import { isUuid } from '../../domain/ids';
import { contactAddress, contactNotFound } from '../../domain/comms/contacts';
import { encodeCursor } from '../messages/queries';
import { pageLimit, whereBefore, whereEmail } from '../contactLists/queries';
import { CONTACTS_SCHEMA } from './projection';

export type ContactStatus = 'subscribed' | 'unsubscribed';

/** A contact as the communications API shows it (docs/COMMUNICATIONS.md "Contacts"). */
export interface ContactView {
  id: string;
  list_id: string;
  /** Trimmed and lower-cased. */
  email: string;
  name: string | null;
  fields: Record<string, string>;
  status: ContactStatus;
  unsubscribed_at: string | null;
  created_at: string;
  updated_at: string;
}
export interface ContactPage { items: ContactView[]; next_cursor: string | null }

export const CONTACTS_PAGE = { defaultLimit: 100, maxLimit: 500 } as const;

interface Row {
  id: string; list_id: string; email: string; name: string | null; fields: Record<string, string>; status: ContactStatus;
  unsubscribed_at: Date | null; created_at: Date; updated_at: Date;
}
const COLUMNS = 'id, list_id, email, name, fields, status, unsubscribed_at, created_at, updated_at';
const viewOf = (r: Row): ContactView => ({
  id: r.id, list_id: r.list_id, email: r.email, name: r.name, fields: r.fields, status: r.status,
  unsubscribed_at: r.unsubscribed_at?.toISOString() ?? null, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString(),
});

/** A list's contacts, newest first, keyset-paginated on (created_at, id). The caller has checked the list is the tenant's. */
export async function listContacts(
  db: Knex, tenantId: string, listId: string, q: { limit?: number; cursor?: string; email?: string; status?: string },
): Promise<ContactPage> {
  const limit = pageLimit(q.limit, CONTACTS_PAGE);
  const where = ['tenant_id = ?', 'list_id = ?', 'removed_at is null'];
  const b: Knex.RawBinding[] = [tenantId, listId];
  if (q.email !== undefined) whereEmail(where, b, q.email, contactAddress);
  if (q.status !== undefined) {
    if (q.status !== 'subscribed' && q.status !== 'unsubscribed') throw fail('invalid_query', 400, 'status must be subscribed or unsubscribed');
    where.push('status = ?');
    b.push(q.status);
  }
  if (q.cursor !== undefined) whereBefore(where, b, q.cursor, 'created_at');
  b.push(limit + 1);
  const r = await db.raw(
    `select ${COLUMNS}, to_json(created_at) #>> '{}' as cursor_at from "${CONTACTS_SCHEMA}"."contacts"
     where ${where.join(' and ')} order by created_at desc, id desc limit ?`,
    b,
  );
  const rows = r.rows as Array<Row & { cursor_at: string }>;
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { items: page.map(viewOf), next_cursor: rows.length > limit ? encodeCursor(last.cursor_at, last.id) : null };
}

/** One contact of the tenant's list; 404 contact_not_found when it is not on it (removed, another list, another tenant). */
export async function getContact(db: Knex, tenantId: string, listId: string, contactId: string): Promise<ContactView> {
  if (!isUuid(contactId)) throw contactNotFound();
  const r = await db.raw(
    `select ${COLUMNS} from "${CONTACTS_SCHEMA}"."contacts" where id = ? and tenant_id = ? and list_id = ? and removed_at is null`,
    [contactId, tenantId, listId],
  );
  const row = r.rows[0] as Row | undefined;
  if (!row) throw contactNotFound();
  return viewOf(row);
}

/** Contacts on a list now (subscribed or unsubscribed): the cap's count. */
export async function contactCount(db: Knex, listId: string): Promise<number> {
  const r = await db.withSchema(CONTACTS_SCHEMA).table('list_sizes').where({ list_id: listId }).first('contact_count') as { contact_count: number } | undefined;
  return r?.contact_count ?? 0;
}

export interface CampaignContact { contactId: string; email: string; name: string | null; fields: Record<string, string> }

/** Subscribed contacts of a tenant's list in contactId order, after `afterContactId` (exclusive), at most `limit`. */
export async function contactsForCampaign(db: Knex, tenantId: string, listId: string, afterContactId: string | null, limit: number): Promise<CampaignContact[]> {
  if (!isUuid(tenantId) || !isUuid(listId) || (afterContactId !== null && !isUuid(afterContactId))) return [];
  // Exactly `limit` when there are that many: a caller takes a short page as the end of the list.
  const n = Math.floor(limit);
  if (!(n > 0)) return [];
  const r = await db.raw(
    `select id, email, name, fields from "${CONTACTS_SCHEMA}"."contacts"
     where list_id = ? and tenant_id = ? and removed_at is null and status = 'subscribed' ${afterContactId === null ? '' : 'and id > ?'}
     order by id limit ?`,
    afterContactId === null ? [listId, tenantId, n] : [listId, tenantId, afterContactId, n],
  );
  return (r.rows as Array<{ id: string; email: string; name: string | null; fields: Record<string, string> }>)
    .map((x) => ({ contactId: x.id, email: x.email, name: x.name, fields: x.fields }));
}
