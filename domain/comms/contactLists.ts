import { fail } from '../errors';
import type { ContactListCreated, DomainEvent } from '../events';

/**
 * A tenant's contact lists (communications, docs/COMMUNICATIONS.md). The aggregate is the tenant's
 * whole set of lists, stream `contactLists-<tenantId>`: both rules span every list of the tenant
 * (a name is unique among them, and there are at most MAX_LISTS_PER_TENANT), so they are decided
 * on one stream and an append at the loaded revision makes them hold under concurrent creates.
 * Pure: the clock and the new id come in with the command.
 */

export const LIST_LIMITS = {
  nameMax: 100,
  descriptionMax: 500,
  perTenant: 100,
} as const;

export type ContactListEvent = DomainEvent<'ContactListCreated'>;
export const CONTACT_LIST_EVENT_TYPES = ['ContactListCreated'] as const;

export interface ContactListsState {
  /** Normalised name → list id. */
  names: ReadonlyMap<string, string>;
  count: number;
}

export const initialContactLists = (): ContactListsState => ({ names: new Map(), count: 0 });

/**
 * The key two names collide on: Unicode NFKC, case folded, runs of whitespace as one space. So
 * "Newsletter", "newsletter " and "NEWS\u00a0LETTER"-style variants that only differ by case or
 * spacing are one name; the list keeps the name as given (trimmed).
 */
export const nameKey = (name: string): string => name.normalize('NFKC').toLowerCase().replace(/\s+/g, ' ').trim();

export function evolve(state: ContactListsState, event: ContactListEvent): ContactListsState {
  switch (event.type) {
    case 'ContactListCreated': {
      const names = new Map(state.names);
      names.set(nameKey(event.data.name), event.data.listId);
      return { names, count: state.count + 1 };
    }
  }
}

export const fold = (events: Iterable<ContactListEvent>): ContactListsState => {
  let s = initialContactLists();
  for (const e of events) s = evolve(s, e);
  return s;
};

export interface CreateContactList {
  listId: string;
  tenantId: string;
  name: string;
  description: string | null;
  now: Date;
}

// C0 and C1 controls, DEL: a name is shown in lists and UIs, one line.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** The fields of a create request, trimmed and checked (400 validation_error with `field`). */
export function contactListFields(body: unknown): { name: string; description: string | null } {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw fail('validation_error', 400, 'The body must be a JSON object');
  const b = body as Record<string, unknown>;
  const invalid = (field: string, message: string) => fail('validation_error', 400, message, { details: { field } });
  if (b.name === undefined || b.name === null) throw invalid('name', 'name is required');
  if (typeof b.name !== 'string') throw invalid('name', 'name must be a string');
  const name = b.name.trim();
  if (name.length === 0) throw invalid('name', 'name is required');
  if ([...name].length > LIST_LIMITS.nameMax) throw invalid('name', `name is longer than ${LIST_LIMITS.nameMax} characters`);
  if (CONTROL.test(name)) throw invalid('name', 'name cannot contain control characters or line breaks');
  let description: string | null = null;
  if (b.description !== undefined && b.description !== null) {
    if (typeof b.description !== 'string') throw invalid('description', 'description must be a string');
    const d = b.description.trim();
    if ([...d].length > LIST_LIMITS.descriptionMax) throw invalid('description', `description is longer than ${LIST_LIMITS.descriptionMax} characters`);
    description = d === '' ? null : d;
  }
  return { name, description };
}

export function decideCreate(state: ContactListsState, cmd: CreateContactList): ContactListEvent[] {
  if (state.names.has(nameKey(cmd.name))) {
    throw fail('list_name_taken', 409, `This tenant already has a list named "${cmd.name}" (names are compared without regard to case)`, {
      nextAction: 'Choose another name', details: { listId: state.names.get(nameKey(cmd.name)) },
    });
  }
  if (state.count >= LIST_LIMITS.perTenant) {
    throw fail('list_limit_reached', 409, `A tenant can have at most ${LIST_LIMITS.perTenant} lists`, { details: { limit: LIST_LIMITS.perTenant } });
  }
  const data: ContactListCreated = {
    listId: cmd.listId, tenantId: cmd.tenantId, name: cmd.name, description: cmd.description, createdAt: cmd.now.toISOString(),
  };
  return [{ type: 'ContactListCreated', data }];
}
