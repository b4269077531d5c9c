import type { Knex } from 'knex';
import { streamName, WrongExpectedRevisionError, type EventStore } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { asDomainEvent, toEventData } from '../../domain/events';
import { newId, type Clock } from '../../domain/ids';
import { CONTACT_LIST_EVENT_TYPES, contactListFields, decideCreate, fold, type ContactListEvent } from '../../domain/comms/contactLists';
import { CONTACT_LISTS_SCHEMA } from '../../projections/contactLists/projection';
import type { ContactListView } from '../../projections/contactLists/queries';
import { awaitRow } from '../readYourWrites';

/**
 * Creating a contact list (docs/COMMUNICATIONS.md "Lists"). The decision is taken on the tenant's
 * `contactLists-<tenantId>` stream and appended at the revision it was taken on; a concurrent
 * create makes the append fail, and the decision is taken again on the new state: of two creates
 * of one name exactly one succeeds, the other is 409 list_name_taken, and the cap cannot be
 * overshot. Then the wait until the read model shows the list, so the next GET lists it.
 */

export interface ContactListDeps { store: EventStore; db: Knex; clock: Clock }

const stream = (tenantId: string) => streamName('contactLists', tenantId);
/** Concurrent creates of one tenant retry; each retry sees at least one more list, so this bounds the wait, not the outcome. */
const MAX_ATTEMPTS = 12;

export async function createContactList(deps: ContactListDeps, tenantId: string, actor: string, body: unknown): Promise<ContactListView> {
  const { name, description } = contactListFields(body);
  const listId = newId();
  for (let attempt = 1; ; attempt++) {
    const recorded = await deps.store.readStream(stream(tenantId));
    const events = recorded.map(asDomainEvent).filter((e): e is ContactListEvent => e !== null && (CONTACT_LIST_EVENT_TYPES as readonly string[]).includes(e.type));
    const now = deps.clock.now();
    const decided = decideCreate(fold(events), { listId, tenantId, name, description, now });
    try {
      const r = await deps.store.append(stream(tenantId), decided.map((e) => toEventData(newId(), e, { actor })), {
        expectedRevision: recorded.length === 0 ? 'no_stream' : recorded[recorded.length - 1].revision,
      });
      await awaitRow(deps.db, CONTACT_LISTS_SCHEMA, 'lists', listId, r.nextExpectedRevision);
      const at = now.toISOString();
      return { id: listId, name, description, contact_count: 0, created_at: at, updated_at: at };
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError)) throw err;
      if (attempt >= MAX_ATTEMPTS) throw fail('list_conflict', 409, 'Lists of this tenant changed too often while this request was handled', { nextAction: 'Retry the request' });
      await new Promise((r) => setTimeout(r, Math.random() * 10 * attempt));
    }
  }
}
