import { streamName, type EventStore, type RecordedEvent } from '../../domain/eventStore';
import { DomainError, fail } from '../../domain/errors';
import { isUuid, type Clock } from '../../domain/ids';
import { liveList } from '../../domain/comms/contactLists';
import {
  CONTACT_BATCH_LIMITS, CONTACT_EVENT_TYPES, CONTACT_LIMITS, contactFields, contactIdOf, contactUpdate, decideAdd, decideRemove, decideUnsubscribe, decideUpdate, fold, planContactBatch,
  type ContactEvent, type ContactFields,
} from '../../domain/comms/contacts';
import type { BatchItemError, BatchPlanItem } from '../../domain/comms/batch';
import type { UnsubscribeTarget } from '../../domain/comms/unsubscribe';
import { CONTACTS_SCHEMA } from '../../projections/contacts/projection';
import { contactCount, getContact, type ContactView } from '../../projections/contacts/queries';
import { decideOnStream, eventsOf } from '../decideOnStream';
import { awaitRow, awaitRows, type ReadYourWritesDeps } from '../readYourWrites';
import { eachLimited } from './batch';
import { listIdGiven, loadContactLists } from './contactLists';

/**
 * Adding, removing and unsubscribing contacts (docs/COMMUNICATIONS.md "Contacts", "Unsubscribe").
 * Each decision is taken on the contact's own stream `contact-<id>` (id derived from tenant, list
 * and address) and appended at the revision it was taken on: of concurrent adds of one address,
 * one appends and the others, deciding again on the new state, are 409 contact_exists. Then the
 * wait until the `contacts` read model shows the change, so the caller's next GET sees it.
 */

export interface ContactDeps extends ReadYourWritesDeps { store: EventStore; clock: Clock }

const stream = (contactId: string) => streamName('contact', contactId);
/**
 * A conflict means another request changed this very contact. For an add or a removal, deciding
 * again settles it (exists / gone), so few attempts are needed. Updates do not settle each other
 * (each is a change of its own), so concurrent updates of one contact take turns: more attempts.
 */
const MAX_ATTEMPTS = 5;
const MAX_UPDATE_ATTEMPTS = 25;

const contactEvents = (recorded: RecordedEvent[]): ContactEvent[] =>
  eventsOf<ContactEvent>(recorded, CONTACT_EVENT_TYPES);

/**
 * 404 list_not_found unless `listId` is one of the tenant's live lists (a deleted one is not),
 * decided on the tenant's list stream (not a read model). Returns the id as stored (lower case):
 * a uuid written in capitals is the same list, and contact ids are derived from the stored form.
 */
export async function requireList(store: EventStore, tenantId: string, listId: string): Promise<string> {
  const id = listIdGiven(listId);
  liveList(await loadContactLists(store, tenantId), id);
  return id;
}

/**
 * Decides on the contact's stream and appends at the revision decided on (deciding again after a
 * conflict, up to `attempts` times), then waits for the read model (the read-your-writes `wait`),
 * unless `wait` is null (a batch waits for all its rows at once). `revision`: what the stream is at
 * after the append (null: nothing appended).
 */
async function decideAndAppend(
  deps: ContactDeps, wait: string | null, contactId: string, actor: string,
  decide: (events: ContactEvent[], now: Date) => ContactEvent[],
  { attempts = MAX_ATTEMPTS }: { attempts?: number } = {},
): Promise<{ appended: ContactEvent[]; now: Date; revision: bigint | null }> {
  let now = deps.clock.now();
  const d = await decideOnStream(deps.store, stream(contactId), {
    actor, attempts,
    exhausted: () => fail('contact_conflict', 409, 'This contact changed too often while the request was handled', { nextAction: 'Retry the request' }),
  }, (recorded) => {
    now = deps.clock.now();
    return decide(contactEvents(recorded), now);
  });
  if (d.appended.length === 0) return { appended: [], now, revision: null };
  if (wait !== null) await awaitRow(deps, wait, { schema: CONTACTS_SCHEMA, table: 'contacts', id: contactId, revision: d.revision! });
  return { appended: d.appended, now, revision: d.revision };
}

export async function addContact(deps: ContactDeps, tenantId: string, actor: string, listIdAsGiven: string, body: unknown): Promise<ContactView> {
  const listId = await requireList(deps.store, tenantId, listIdAsGiven);
  const f = contactFields(body);
  const contactId = contactIdOf(tenantId, listId, f.email);
  // The cap is read from the read model: adds in flight together can pass it by their number (docs).
  // An address already on a full list is contact_exists, as in a batch: it would add nothing.
  if (await contactCount(deps.db, listId) >= CONTACT_LIMITS.perList && !fold(contactEvents(await deps.store.readStream(stream(contactId)))).present) {
    throw fail('contact_limit_reached', 409, `A list can have at most ${CONTACT_LIMITS.perList} contacts`, { details: { limit: CONTACT_LIMITS.perList } });
  }
  const { now } = await decideAndAppend(deps, 'contact.add', contactId, actor, (events, at) => decideAdd(fold(events), { contactId, tenantId, listId, ...f, now: at }));
  const at = now.toISOString();
  return { id: contactId, list_id: listId, email: f.email, name: f.name, fields: f.fields, status: 'subscribed', unsubscribed_at: null, created_at: at, updated_at: at };
}

export interface ContactBatchItem {
  /** Position in the request's `contacts`. */
  index: number;
  /** Trimmed and lower-cased; null for an invalid item without a string address. */
  email: string | null;
  status: 'added' | 'exists' | 'invalid' | 'duplicate';
  /** added, exists, duplicate: the contact of this address on the list. */
  contact_id?: string;
  /** invalid: what the single add would have answered (code, message, field). */
  error?: BatchItemError;
}
export interface ContactBatchResult { added: number; existing: number; invalid: number; duplicates: number; items: ContactBatchItem[] }

/**
 * Batch import (docs/COMMUNICATIONS.md "Batch import"): every item checked as a single add, then
 * each new address decided and appended on its own stream as `addContact` does (`decideAdd` at the
 * revision read; `contact_exists` becomes the item's `exists`), CONTACT_BATCH_LIMITS.parallelAppends
 * at a time. Per-item outcome: an invalid item does not stop the others. The cap is checked once
 * for the whole batch before anything is written. One wait for all the rows at the end.
 * `limits.perList` is for tests (a small cap); the route always uses CONTACT_LIMITS.
 */
export async function addContactsBatch(
  deps: ContactDeps, tenantId: string, actor: string, listIdAsGiven: string, body: unknown,
  limits: { perList: number } = CONTACT_LIMITS,
): Promise<ContactBatchResult> {
  const listId = await requireList(deps.store, tenantId, listIdAsGiven);
  const plan = planContactBatch(body);
  const idOf = (email: string) => contactIdOf(tenantId, listId, email);
  const toAdd = plan.filter((p): p is Extract<BatchPlanItem<ContactFields>, { kind: 'add' }> => p.kind === 'add');

  // The cap, on the read model like the single add: the addresses not shown on the list yet would be new.
  const ids = toAdd.map((p) => idOf(p.email));
  const shown = ids.length === 0 ? 0 : Number(((await deps.db.withSchema(CONTACTS_SCHEMA).table('contacts')
    .whereIn('id', ids).whereNull('removed_at').count({ n: '*' })) as Array<{ n: string | number }>)[0].n);
  const count = await contactCount(deps.db, listId);
  const incoming = ids.length - shown;
  if (incoming > 0 && count + incoming > limits.perList) {
    const remaining = Math.max(0, limits.perList - count);
    throw fail('contact_limit_reached', 409, `A list can have at most ${limits.perList} contacts: this batch would add ${incoming}, ${remaining} can be added`, {
      nextAction: 'Send fewer new contacts, or remove some from the list', details: { limit: limits.perList, remaining },
    });
  }

  const outcome = new Map<number, 'added' | 'exists'>();
  const written = new Map<string, bigint>();
  await eachLimited(toAdd, CONTACT_BATCH_LIMITS.parallelAppends, async (p) => {
    const contactId = idOf(p.email);
    try {
      const { revision } = await decideAndAppend(deps, null, contactId, actor, (events, now) => decideAdd(fold(events), { contactId, tenantId, listId, ...p.item, now }));
      if (revision !== null) written.set(contactId, revision);
      outcome.set(p.index, 'added');
    } catch (err) {
      if (!(err instanceof DomainError && err.code === 'contact_exists')) throw err;
      outcome.set(p.index, 'exists');
    }
  });
  await awaitRows(deps, 'contact.add_batch', { schema: CONTACTS_SCHEMA, table: 'contacts', rows: written });

  const items = plan.map((p): ContactBatchItem => {
    if (p.kind === 'invalid') return { index: p.index, email: p.email, status: 'invalid', error: p.error };
    return { index: p.index, email: p.email, status: p.kind === 'duplicate' ? 'duplicate' : outcome.get(p.index)!, contact_id: idOf(p.email) };
  });
  const n = (status: ContactBatchItem['status']) => items.filter((i) => i.status === status).length;
  return { added: n('added'), existing: n('exists'), invalid: n('invalid'), duplicates: n('duplicate'), items };
}

/**
 * A contact id of a route (404 contact_not_found when not a uuid), lower-cased: the stream is named
 * by the lower-case id (as the GET's uuid column compares), so a uuid in capitals is the same contact.
 */
function contactIdGiven(id: string): string {
  if (!isUuid(id)) throw fail('contact_not_found', 404, 'No such contact on this list');
  return id.toLowerCase();
}

export async function removeContact(deps: ContactDeps, tenantId: string, actor: string, listIdAsGiven: string, id: string): Promise<{ id: string; deleted: true }> {
  const listId = await requireList(deps.store, tenantId, listIdAsGiven);
  const contactId = contactIdGiven(id);
  await decideAndAppend(deps, 'contact.remove', contactId, actor, (events, now) => decideRemove(fold(events), { contactId, tenantId, listId, now }));
  return { id: contactId, deleted: true };
}

/**
 * Changes a contact's name or merge fields (docs/COMMUNICATIONS.md "Updating a contact"), decided
 * on its stream like a removal; answers the contact as the read model then shows it.
 */
export async function updateContact(deps: ContactDeps, tenantId: string, actor: string, listIdAsGiven: string, id: string, body: unknown): Promise<ContactView> {
  const listId = await requireList(deps.store, tenantId, listIdAsGiven);
  const contactId = contactIdGiven(id);
  const update = contactUpdate(body);
  await decideAndAppend(deps, 'contact.update', contactId, actor, (events, now) => decideUpdate(fold(events), { ...update, contactId, tenantId, listId, now }), { attempts: MAX_UPDATE_ATTEMPTS });
  return getContact(deps.db, tenantId, listId, contactId);
}

/**
 * The unsubscribe link was used (a verified token): `unsubscribed` whether this call recorded it
 * or an earlier one did (idempotent), `invalid` when the token names no contact Motor has.
 */
export async function unsubscribeContact(deps: ContactDeps, t: UnsubscribeTarget, via: 'one_click' | 'page'): Promise<UnsubscribePage> {
  let page: UnsubscribePage = { kind: 'invalid' };
  await decideAndAppend(deps, 'contact.unsubscribe', t.contactId, 'contact', (events, now) => {
    const state = fold(events);
    const decided = decideUnsubscribe(state, { ...t, via, now });
    page = decided === null || state.email === null ? { kind: 'invalid' } : { kind: 'unsubscribed', email: state.email };
    return decided ?? [];
  });
  return page;
}

export type UnsubscribePage = { kind: 'confirm' | 'unsubscribed'; email: string } | { kind: 'invalid' };

/** What the unsubscribe page shows for a verified token (reads the contact's stream; changes nothing). */
export async function inspectUnsubscribe(store: EventStore, t: UnsubscribeTarget): Promise<UnsubscribePage> {
  const s = fold(contactEvents(await store.readStream(stream(t.contactId))));
  if (s.email === null || s.tenantId !== t.tenantId || s.listId !== t.listId) return { kind: 'invalid' };
  return { kind: s.unsubscribed ? 'unsubscribed' : 'confirm', email: s.email };
}
