import type { Knex } from 'knex';
import { streamName, WrongExpectedRevisionError, type EventStore, type RecordedEvent } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { asDomainEvent, toEventData } from '../../domain/events';
import { isUuid, newId, type Clock } from '../../domain/ids';
import { CONTACT_LIST_EVENT_TYPES, fold as foldLists, type ContactListEvent } from '../../domain/comms/contactLists';
import {
  CONTACT_EVENT_TYPES, CONTACT_LIMITS, contactFields, contactIdOf, decideAdd, decideRemove, decideUnsubscribe, fold, type ContactEvent,
} from '../../domain/comms/contacts';
import type { UnsubscribeTarget } from '../../domain/comms/unsubscribe';
import { CONTACTS_SCHEMA } from '../../projections/contacts/projection';
import { contactCount, type ContactView } from '../../projections/contacts/queries';
import { awaitRow } from '../readYourWrites';

/**
 * Adding, removing and unsubscribing contacts (docs/COMMUNICATIONS.md "Contacts", "Unsubscribe").
 * Each decision is taken on the contact's own stream `contact-<id>` (id derived from tenant, list
 * and address) and appended at the revision it was taken on: of concurrent adds of one address,
 * one appends and the others, deciding again on the new state, are 409 contact_exists. Then the
 * wait until the `contacts` read model shows the change, so the caller's next GET sees it.
 */

export interface ContactDeps { store: EventStore; db: Knex; clock: Clock }

const stream = (contactId: string) => streamName('contact', contactId);
/** A conflict means another request changed this very contact; deciding again settles it (exists / gone), so few attempts are needed. */
const MAX_ATTEMPTS = 5;

const contactEvents = (recorded: RecordedEvent[]): ContactEvent[] =>
  recorded.map(asDomainEvent).filter((e): e is ContactEvent => e !== null && (CONTACT_EVENT_TYPES as readonly string[]).includes(e.type));

const listNotFound = () => fail('list_not_found', 404, 'No such list for this tenant');

/** 404 list_not_found unless `listId` is one of the tenant's lists, decided on the tenant's list stream (not a read model). */
export async function requireList(store: EventStore, tenantId: string, listId: string): Promise<void> {
  if (!isUuid(listId)) throw listNotFound();
  const recorded = await store.readStream(streamName('contactLists', tenantId));
  const lists = foldLists(recorded.map(asDomainEvent).filter((e): e is ContactListEvent => e !== null && (CONTACT_LIST_EVENT_TYPES as readonly string[]).includes(e.type)));
  if (![...lists.names.values()].includes(listId)) throw listNotFound();
}

async function decideAndAppend(
  deps: ContactDeps, contactId: string, actor: string,
  decide: (events: ContactEvent[], now: Date) => ContactEvent[],
): Promise<{ appended: ContactEvent[]; now: Date }> {
  for (let attempt = 1; ; attempt++) {
    const recorded = await deps.store.readStream(stream(contactId));
    const now = deps.clock.now();
    const decided = decide(contactEvents(recorded), now);
    if (decided.length === 0) return { appended: [], now };
    try {
      const r = await deps.store.append(stream(contactId), decided.map((e) => toEventData(newId(), e, { actor })), {
        expectedRevision: recorded.length === 0 ? 'no_stream' : recorded[recorded.length - 1].revision,
      });
      await awaitRow(deps.db, CONTACTS_SCHEMA, 'contacts', contactId, r.nextExpectedRevision);
      return { appended: decided, now };
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError)) throw err;
      if (attempt >= MAX_ATTEMPTS) throw fail('contact_conflict', 409, 'This contact changed too often while the request was handled', { nextAction: 'Retry the request' });
      await new Promise((res) => setTimeout(res, Math.random() * 10 * attempt));
    }
  }
}

export async function addContact(deps: ContactDeps, tenantId: string, actor: string, listId: string, body: unknown): Promise<ContactView> {
  await requireList(deps.store, tenantId, listId);
  const f = contactFields(body);
  // The cap is read from the read model: adds in flight together can pass it by their number (docs).
  if (await contactCount(deps.db, listId) >= CONTACT_LIMITS.perList) {
    throw fail('contact_limit_reached', 409, `A list can have at most ${CONTACT_LIMITS.perList} contacts`, { details: { limit: CONTACT_LIMITS.perList } });
  }
  const contactId = contactIdOf(tenantId, listId, f.email);
  const { now } = await decideAndAppend(deps, contactId, actor, (events, at) => decideAdd(fold(events), { contactId, tenantId, listId, ...f, now: at }));
  const at = now.toISOString();
  return { id: contactId, list_id: listId, email: f.email, name: f.name, fields: f.fields, status: 'subscribed', unsubscribed_at: null, created_at: at, updated_at: at };
}

export async function removeContact(deps: ContactDeps, tenantId: string, actor: string, listId: string, contactId: string): Promise<{ id: string; deleted: true }> {
  await requireList(deps.store, tenantId, listId);
  if (!isUuid(contactId)) throw fail('contact_not_found', 404, 'No such contact on this list');
  await decideAndAppend(deps, contactId, actor, (events, now) => decideRemove(fold(events), { contactId, tenantId, listId, now }));
  return { id: contactId, deleted: true };
}

/**
 * The unsubscribe link was used (a verified token): `unsubscribed` whether this call recorded it
 * or an earlier one did (idempotent), `invalid` when the token names no contact Motor has.
 */
export async function unsubscribeContact(deps: ContactDeps, t: UnsubscribeTarget, via: 'one_click' | 'page'): Promise<UnsubscribePage> {
  let page: UnsubscribePage = { kind: 'invalid' };
  await decideAndAppend(deps, t.contactId, 'contact', (events, now) => {
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
