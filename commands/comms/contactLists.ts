import type { Knex } from 'knex';
import { streamName, type EventStore, type RecordedEvent } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { isUuid, newId, type Clock } from '../../domain/ids';
import {
  CONTACT_LIST_EVENT_TYPES, contactListChanges, contactListFields, decideCreate, decideDelete, decideUpdate, evolve, fold, liveList,
  type ContactListEvent, type ContactListsState,
} from '../../domain/comms/contactLists';
import { campaignsUnderWayOnList } from '../../projections/campaigns/queries';
import { CONTACT_LISTS_SCHEMA } from '../../projections/contactLists/projection';
import { getContactList, type ContactListView } from '../../projections/contactLists/queries';
import { contactCount } from '../../projections/contacts/queries';
import { decideOnStream, eventsOf } from '../decideOnStream';
import { awaitRow, type ReadYourWritesDeps } from '../readYourWrites';

/**
 * Creating, renaming and deleting contact lists (docs/COMMUNICATIONS.md "Lists"). Each decision is
 * taken on the tenant's `contactLists-<tenantId>` stream and appended at the revision it was taken
 * on; a concurrent write makes the append fail, and the decision is taken again on the new state:
 * of two creates or renames to one name exactly one succeeds, the other is 409 list_name_taken,
 * and the cap cannot be overshot. Then the wait until the read model shows the change, so the
 * next GET does.
 */

export interface ContactListDeps extends ReadYourWritesDeps { store: EventStore; clock: Clock }

const stream = (tenantId: string) => streamName('contactLists', tenantId);
/** Concurrent writes of one tenant retry; each retry sees at least one more event, so this bounds the wait, not the outcome. */
const MAX_ATTEMPTS = 12;

const listEvents = (recorded: RecordedEvent[]): ContactListEvent[] =>
  eventsOf<ContactListEvent>(recorded, CONTACT_LIST_EVENT_TYPES);

/** The tenant's lists folded from its stream. */
export async function loadContactLists(store: EventStore, tenantId: string): Promise<ContactListsState> {
  return fold(listEvents(await store.readStream(stream(tenantId))));
}

/**
 * A list id of a route, as stored (lower case): a uuid written in capitals is the same list. Not a
 * uuid: 404 list_not_found, as the contact routes answer (no list has that id).
 */
export function listIdGiven(id: string): string {
  if (!isUuid(id)) throw fail('list_not_found', 404, 'No such list for this tenant');
  return id.toLowerCase();
}

/**
 * Decides on the tenant's stream and appends at the revision decided on (deciding again after a
 * conflict), then waits until the row of `listId` shows the append. Returns the state after the
 * decision and what was appended (nothing: no append, no wait).
 */
async function decideAndAppend(
  deps: ContactListDeps, wait: string, tenantId: string, actor: string, listId: string,
  decide: (state: ContactListsState, now: Date) => Promise<ContactListEvent[]> | ContactListEvent[],
): Promise<{ state: ContactListsState; appended: ContactListEvent[] }> {
  let state = fold([]);
  const d = await decideOnStream(deps.store, stream(tenantId), {
    actor, attempts: MAX_ATTEMPTS,
    exhausted: () => fail('list_conflict', 409, 'Lists of this tenant changed too often while this request was handled', { nextAction: 'Retry the request' }),
  }, (recorded) => {
    state = fold(listEvents(recorded));
    return decide(state, deps.clock.now());
  });
  if (d.appended.length === 0) return { state, appended: [] };
  await awaitRow(deps, wait, { schema: CONTACT_LISTS_SCHEMA, table: 'lists', id: listId, revision: d.revision! });
  return { state: d.appended.reduce(evolve, state), appended: d.appended };
}

/** The record of a live list from the decided state, so the answer does not depend on the projector. */
function recordOf(state: ContactListsState, listId: string, contactCount: number): ContactListView {
  const l = liveList(state, listId);
  return { id: listId, name: l.name, description: l.description, contact_count: contactCount, created_at: l.createdAt, updated_at: l.updatedAt };
}

export async function createContactList(deps: ContactListDeps, tenantId: string, actor: string, body: unknown): Promise<ContactListView> {
  const { name, description } = contactListFields(body);
  const listId = newId();
  const { state } = await decideAndAppend(deps, 'list.create', tenantId, actor, listId, (s, now) => decideCreate(s, { listId, tenantId, name, description, now }));
  return recordOf(state, listId, 0);
}

/** GET /lists/{listId}: the live list from the read model (404 list_not_found otherwise). */
export async function readContactList(db: Knex, tenantId: string, id: string): Promise<ContactListView> {
  const list = await getContactList(db, tenantId, listIdGiven(id));
  if (!list) throw fail('list_not_found', 404, 'No such list for this tenant');
  return list;
}

/** Renames a list or changes its description (docs/COMMUNICATIONS.md "Renaming"); nothing changed: nothing appended. */
export async function updateContactList(deps: ContactListDeps, tenantId: string, actor: string, id: string, body: unknown): Promise<ContactListView> {
  const listId = listIdGiven(id);
  const changes = contactListChanges(body);
  const { state } = await decideAndAppend(deps, 'list.update', tenantId, actor, listId, (s, now) => decideUpdate(s, { ...changes, listId, tenantId, now }));
  return recordOf(state, listId, await contactCount(deps.db, listId));
}

/**
 * Deletes a list unless a campaign is scheduled or sending to it (read from the campaigns read
 * model on every attempt; docs/COMMUNICATIONS.md "Deleting" for the race with a send).
 */
export async function deleteContactList(deps: ContactListDeps, tenantId: string, actor: string, id: string): Promise<{ id: string; deleted: true }> {
  const listId = listIdGiven(id);
  await decideAndAppend(deps, 'list.delete', tenantId, actor, listId, async (s, now) => {
    liveList(s, listId); // 404 before the campaigns are read
    const campaignsUnderWay = await campaignsUnderWayOnList(deps.db, tenantId, listId);
    return decideDelete(s, { listId, tenantId, campaignsUnderWay, now });
  });
  return { id: listId, deleted: true };
}
