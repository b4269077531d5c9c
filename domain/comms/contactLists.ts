import { fail } from '../errors';
import type { ContactListCreated, ContactListDeleted, ContactListUpdated, DomainEvent } from '../events';
import { NOT_ONE_LINE } from '../oneLine';

/**
 * A tenant's contact lists (communications, docs/COMMUNICATIONS.md). The aggregate is the tenant's
 * whole set of lists, stream `contactLists-<tenantId>`: both rules span every list of the tenant
 * (a name is unique among them, and there are at most MAX_LISTS_PER_TENANT), so they are decided
 * on one stream and an append at the loaded revision makes them hold under concurrent creates,
 * renames and deletes. Pure: the clock, the new id and what the read models say about campaigns
 * come in with the command.
 */

export const LIST_LIMITS = {
  nameMax: 100,
  descriptionMax: 500,
  perTenant: 100,
} as const;

export type ContactListEvent = DomainEvent<'ContactListCreated' | 'ContactListUpdated' | 'ContactListDeleted'>;
export const CONTACT_LIST_EVENT_TYPES = ['ContactListCreated', 'ContactListUpdated', 'ContactListDeleted'] as const;

export interface ContactListFacts { name: string; description: string | null; createdAt: string; updatedAt: string }

export interface ContactListsState {
  /** The live lists by id (a deleted list is gone from here). */
  lists: ReadonlyMap<string, ContactListFacts>;
  /** Normalised name → id, of the live lists. */
  names: ReadonlyMap<string, string>;
}

export const initialContactLists = (): ContactListsState => ({ lists: new Map(), names: new Map() });

/**
 * The key two names collide on: Unicode NFKC, case folded, runs of whitespace as one space. So
 * "Newsletter", "newsletter " and "NEWS\u00a0LETTER"-style variants that only differ by case or
 * spacing are one name; the list keeps the name as given (trimmed).
 */
export const nameKey = (name: string): string => name.normalize('NFKC').toLowerCase().replace(/\s+/g, ' ').trim();

export function evolve(state: ContactListsState, event: ContactListEvent): ContactListsState {
  const lists = new Map(state.lists);
  const names = new Map(state.names);
  applyTo(lists, names, event);
  return { lists, names };
}

/** The step of evolve, on maps it may change: fold applies a whole stream to one pair of maps. */
function applyTo(lists: Map<string, ContactListFacts>, names: Map<string, string>, event: ContactListEvent): void {
  const before = lists.get(event.data.listId);
  switch (event.type) {
    case 'ContactListCreated': {
      const d = event.data;
      if (before) names.delete(nameKey(before.name));
      lists.set(d.listId, { name: d.name, description: d.description, createdAt: d.createdAt, updatedAt: d.createdAt });
      names.set(nameKey(d.name), d.listId);
      break;
    }
    case 'ContactListUpdated': {
      const d = event.data;
      if (!before) return;
      names.delete(nameKey(before.name));
      lists.set(d.listId, { ...before, name: d.name, description: d.description, updatedAt: d.updatedAt });
      names.set(nameKey(d.name), d.listId);
      break;
    }
    case 'ContactListDeleted':
      if (before) names.delete(nameKey(before.name));
      lists.delete(event.data.listId);
      break;
  }
}

/** The tenant's lists from their stream: linear in its events (evolve would copy both maps per event). */
export const fold = (events: Iterable<ContactListEvent>): ContactListsState => {
  const lists = new Map<string, ContactListFacts>();
  const names = new Map<string, string>();
  for (const e of events) applyTo(lists, names, e);
  return { lists, names };
};

export interface CreateContactList {
  listId: string;
  tenantId: string;
  name: string;
  description: string | null;
  now: Date;
}

/** A change of a list (PATCH): a field left out stays as it is. */
export interface ContactListChanges { name?: string; description?: string | null }

export interface UpdateContactList extends ContactListChanges { listId: string; tenantId: string; now: Date }

export interface DeleteContactList {
  listId: string;
  tenantId: string;
  /** The tenant's campaigns that are scheduled or sending to this list (the campaigns read model). */
  campaignsUnderWay: readonly string[];
  now: Date;
}


const invalid = (field: string, message: string) => fail('validation_error', 400, message, { details: { field } });

const requireObject = (body: unknown): Record<string, unknown> => {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw fail('validation_error', 400, 'The body must be a JSON object');
  return body as Record<string, unknown>;
};

/** A given name (not null or absent): trimmed, 1 to nameMax characters, one line. */
function listName(value: unknown): string {
  if (typeof value !== 'string') throw invalid('name', 'name must be a string');
  const name = value.trim();
  if (name.length === 0) throw invalid('name', 'name is required');
  if ([...name].length > LIST_LIMITS.nameMax) throw invalid('name', `name is longer than ${LIST_LIMITS.nameMax} characters`);
  if (NOT_ONE_LINE.test(name)) throw invalid('name', 'name cannot contain control characters or line breaks');
  return name;
}

/** A description: null, absent or empty (after trimming) is null. */
function listDescription(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw invalid('description', 'description must be a string');
  const d = value.trim();
  if ([...d].length > LIST_LIMITS.descriptionMax) throw invalid('description', `description is longer than ${LIST_LIMITS.descriptionMax} characters`);
  return d === '' ? null : d;
}

/** The fields of a create request, trimmed and checked (400 validation_error with `field`). */
export function contactListFields(body: unknown): { name: string; description: string | null } {
  const b = requireObject(body);
  if (b.name === undefined || b.name === null) throw invalid('name', 'name is required');
  return { name: listName(b.name), description: listDescription(b.description) };
}

/**
 * The fields of a PATCH, with the create's rules: `name` a name (null is refused, as a create
 * without one), `description` a description or null / "" to clear it. Neither: 400.
 */
export function contactListChanges(body: unknown): ContactListChanges {
  const b = requireObject(body);
  const changes: ContactListChanges = {};
  if (b.name !== undefined) {
    if (b.name === null) throw invalid('name', 'name cannot be cleared: a list has a name');
    changes.name = listName(b.name);
  }
  if (b.description !== undefined) changes.description = listDescription(b.description);
  if (changes.name === undefined && changes.description === undefined) throw invalid('name', 'Nothing to change: give name or description');
  return changes;
}

const listNotFound = () => fail('list_not_found', 404, 'No such list for this tenant');

/** The live list `listId` of the tenant (404 list_not_found: never created, deleted, or another tenant's stream). */
export function liveList(state: ContactListsState, listId: string): ContactListFacts {
  const list = state.lists.get(listId);
  if (!list) throw listNotFound();
  return list;
}

/** 409 list_name_taken when another live list than `self` has the name's key. */
function assertNameFree(state: ContactListsState, name: string, self: string | null): void {
  const holder = state.names.get(nameKey(name));
  if (holder !== undefined && holder !== self) {
    throw fail('list_name_taken', 409, `This tenant already has a list named "${name}" (names are compared without regard to case)`, {
      nextAction: 'Choose another name', details: { listId: holder },
    });
  }
}

export function decideCreate(state: ContactListsState, cmd: CreateContactList): ContactListEvent[] {
  assertNameFree(state, cmd.name, null);
  if (state.lists.size >= LIST_LIMITS.perTenant) {
    throw fail('list_limit_reached', 409, `A tenant can have at most ${LIST_LIMITS.perTenant} lists`, { details: { limit: LIST_LIMITS.perTenant } });
  }
  const data: ContactListCreated = {
    listId: cmd.listId, tenantId: cmd.tenantId, name: cmd.name, description: cmd.description, createdAt: cmd.now.toISOString(),
  };
  return [{ type: 'ContactListCreated', data }];
}

/**
 * A rename or a new description. The name must be free among the tenant's other live lists (its
 * own name in another case or spacing is allowed); a change that changes nothing is no event.
 */
export function decideUpdate(state: ContactListsState, cmd: UpdateContactList): ContactListEvent[] {
  const list = liveList(state, cmd.listId);
  const name = cmd.name ?? list.name;
  const description = cmd.description === undefined ? list.description : cmd.description;
  if (name === list.name && description === list.description) return [];
  assertNameFree(state, name, cmd.listId);
  const data: ContactListUpdated = { listId: cmd.listId, tenantId: cmd.tenantId, name, description, updatedAt: cmd.now.toISOString() };
  return [{ type: 'ContactListUpdated', data }];
}

/** Deletes a live list, unless a campaign is scheduled or sending to it (409 list_in_use, with their ids). */
export function decideDelete(state: ContactListsState, cmd: DeleteContactList): ContactListEvent[] {
  liveList(state, cmd.listId);
  if (cmd.campaignsUnderWay.length > 0) {
    throw fail('list_in_use', 409, 'A campaign is scheduled or sending to this list', {
      nextAction: 'Cancel the campaigns, or wait until they are sent', details: { campaignIds: [...cmd.campaignsUnderWay] },
    });
  }
  const data: ContactListDeleted = { listId: cmd.listId, tenantId: cmd.tenantId, deletedAt: cmd.now.toISOString() };
  return [{ type: 'ContactListDeleted', data }];
}
