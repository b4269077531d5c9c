import { fail } from '../errors';
import type { DomainEvent } from '../events';
import { uuidV5 } from '../ids';
import { NOT_ONE_LINE } from '../oneLine';
import { commAddress, requiredAddress } from './address';
import { planBatch, type BatchPlanItem } from './batch';

/**
 * A contact: one address on one list of a tenant (communications, docs/COMMUNICATIONS.md
 * "Contacts"). The aggregate is the stream `contact-<contactId>`, where the id is derived from
 * (tenant, list, lower-cased address): every add of one address to one list lands on the same
 * stream, so "already on the list" is the stream's state and an append at the revision it was
 * decided on makes it hold under concurrent adds, with no lock. Pure: the clock comes in with the
 * command.
 */

export const CONTACT_LIMITS = {
  nameMax: 200,
  fieldsMax: 20,
  fieldValueMax: 256,
  /** Contacts present on one list (subscribed or unsubscribed). Checked on the read model: see docs. */
  perList: 100_000,
} as const;

/**
 * One batch import (`POST /lists/{listId}/contacts/batch`, docs/COMMUNICATIONS.md "Batch import"):
 * at most `maxItems` contacts per call, and at most `parallelAppends` of their streams read and
 * appended at once.
 */
export const CONTACT_BATCH_LIMITS = { maxItems: 1_000, parallelAppends: 16 } as const;

/** Merge names a campaign fills itself: a contact field cannot shadow them. */
export const RESERVED_FIELD_NAMES: readonly string[] = ['name', 'identity_name', 'unsubscribe_url'];
const FIELD_KEY_RE = /^[a-z][a-z0-9_]{0,39}$/;

export type ContactEvent = DomainEvent<'ContactAdded' | 'ContactRemoved' | 'ContactUnsubscribed' | 'ContactUpdated'>;
export const CONTACT_EVENT_TYPES = ['ContactAdded', 'ContactRemoved', 'ContactUnsubscribed', 'ContactUpdated'] as const;

/** The address a contact is kept under (and unique by): trimmed and lower-cased whole, like a suppression. */
export const contactAddress = commAddress;

/** The contact id of an address on a list: the same for every add, so the stream decides uniqueness. */
export const contactIdOf = (tenantId: string, listId: string, email: string): string => uuidV5(`commContact:${tenantId}:${listId}:${contactAddress(email)}`);

export interface ContactState {
  /** On the list now (added and not removed since). */
  present: boolean;
  /** Unsubscribed since the last add. */
  unsubscribed: boolean;
  email: string | null;
  tenantId: string | null;
  listId: string | null;
  name: string | null;
  fields: Record<string, string>;
}

export const initialContact = (): ContactState => ({ present: false, unsubscribed: false, email: null, tenantId: null, listId: null, name: null, fields: {} });

export function evolve(state: ContactState, event: ContactEvent): ContactState {
  switch (event.type) {
    case 'ContactAdded':
      return {
        present: true, unsubscribed: false, email: event.data.email, tenantId: event.data.tenantId, listId: event.data.listId,
        name: event.data.name, fields: event.data.fields,
      };
    case 'ContactUpdated':
      return { ...state, name: event.data.name, fields: event.data.fields };
    case 'ContactRemoved':
      return { ...state, present: false };
    case 'ContactUnsubscribed':
      return { ...state, unsubscribed: true };
  }
}

export const fold = (events: Iterable<ContactEvent>): ContactState => {
  let s = initialContact();
  for (const e of events) s = evolve(s, e);
  return s;
};

export interface ContactFields { email: string; name: string | null; fields: Record<string, string> }


const invalidField = (field: string, message: string) => fail('validation_error', 400, message, { details: { field } });

/** The fields of an add request, checked and normalised (400 validation_error with `field`). */
export function contactFields(body: unknown): ContactFields {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw fail('validation_error', 400, 'The body must be a JSON object');
  const b = body as Record<string, unknown>;
  const email = requiredAddress(b.email);
  const name = b.name === undefined || b.name === null ? null : contactName(b.name);
  const fields: Record<string, string> = {};
  if (b.fields !== undefined && b.fields !== null) {
    const entries = fieldEntries(b.fields);
    if (entries.length > CONTACT_LIMITS.fieldsMax) throw invalidField('fields', `fields can have at most ${CONTACT_LIMITS.fieldsMax} keys`);
    for (const [k, v] of entries) fields[k] = fieldValue(k, v);
  }
  return { email, name, fields };
}

/** A contact's name: trimmed, at most nameMax characters, one line; empty is none. */
function contactName(value: unknown): string | null {
  if (typeof value !== 'string') throw invalidField('name', 'name must be a string');
  const n = value.trim();
  if ([...n].length > CONTACT_LIMITS.nameMax) throw invalidField('name', `name is longer than ${CONTACT_LIMITS.nameMax} characters`);
  if (NOT_ONE_LINE.test(n)) throw invalidField('name', 'name cannot contain control characters or line breaks');
  return n === '' ? null : n;
}

/** The entries of a `fields` object, each key checked (values are checked by the caller: an update's may be null). */
function fieldEntries(value: unknown): Array<[string, unknown]> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidField('fields', 'fields must be an object of strings');
  const entries = Object.entries(value as Record<string, unknown>);
  for (const [k] of entries) {
    if (!FIELD_KEY_RE.test(k)) throw invalidField('fields', `field name "${k.slice(0, 50)}" must be a lower-case letter then up to 39 letters, digits or underscores`);
    if (RESERVED_FIELD_NAMES.includes(k)) throw invalidField('fields', `field name "${k}" is reserved (${RESERVED_FIELD_NAMES.join(', ')})`);
  }
  return entries;
}

function fieldValue(key: string, v: unknown): string {
  if (typeof v !== 'string') throw invalidField('fields', `field "${key}" must be a string`);
  if ([...v].length > CONTACT_LIMITS.fieldValueMax) throw invalidField('fields', `field "${key}" is longer than ${CONTACT_LIMITS.fieldValueMax} characters`);
  return v;
}

/**
 * What a PATCH changes: `name` (a string, or null / "" to clear it) and `fields` as a JSON merge
 * patch (RFC 7396): a key with a string sets that field, a key with null removes it, the fields
 * not named stay. `email` cannot change (the contact is its address on the list). Nothing to
 * change: 400. Checked here; applied to the contact's state by `decideUpdate`.
 */
export interface ContactUpdate { name?: string | null; fields?: Record<string, string | null> }

export function contactUpdate(body: unknown): ContactUpdate {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw fail('validation_error', 400, 'The body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (b.email !== undefined) throw invalidField('email', 'email cannot be changed: remove the contact and add the new address');
  const update: ContactUpdate = {};
  if (b.name !== undefined) update.name = b.name === null ? null : contactName(b.name);
  if (b.fields !== undefined) {
    if (b.fields === null) throw invalidField('fields', 'fields must be an object (a field set to null is removed)');
    const entries = fieldEntries(b.fields);
    if (entries.length > CONTACT_LIMITS.fieldsMax * 2) throw invalidField('fields', `fields can name at most ${CONTACT_LIMITS.fieldsMax * 2} keys in one change`);
    update.fields = Object.fromEntries(entries.map(([k, v]) => [k, v === null ? null : fieldValue(k, v)]));
  }
  if (update.name === undefined && update.fields === undefined) throw fail('validation_error', 400, 'Nothing to change: give name or fields', { details: { field: 'name' } });
  return update;
}

/**
 * An update of a contact on the list (404 contact_not_found otherwise, as a removal). The merged
 * fields may have at most fieldsMax keys (400). No event when nothing would change.
 */
export function decideUpdate(state: ContactState, cmd: ContactUpdate & { contactId: string; tenantId: string; listId: string; now: Date }): ContactEvent[] {
  if (!state.present || state.tenantId !== cmd.tenantId || state.listId !== cmd.listId || state.email === null) throw contactNotFound();
  const name = cmd.name === undefined ? state.name : cmd.name;
  const fields: Record<string, string> = { ...state.fields };
  for (const [k, v] of Object.entries(cmd.fields ?? {})) {
    if (v === null) delete fields[k];
    else fields[k] = v;
  }
  if (Object.keys(fields).length > CONTACT_LIMITS.fieldsMax) throw invalidField('fields', `a contact can have at most ${CONTACT_LIMITS.fieldsMax} fields`);
  const same = name === state.name && Object.keys(fields).length === Object.keys(state.fields).length && Object.entries(fields).every(([k, v]) => state.fields[k] === v);
  if (same) return [];
  return [{ type: 'ContactUpdated', data: { contactId: cmd.contactId, tenantId: cmd.tenantId, listId: cmd.listId, name, fields, updatedAt: cmd.now.toISOString() } }];
}

const ITEM_KEYS: readonly string[] = ['email', 'name', 'fields'];

/**
 * The items of a batch body `{contacts: [...]}` (`planBatch`): each checked by `contactFields`,
 * exactly as a single add, then the addresses already seen earlier in the batch marked `duplicate`.
 * The body itself not `{contacts: array}` of 1 to maxItems: 400 validation_error (field `contacts`).
 */
export const planContactBatch = (body: unknown): BatchPlanItem<ContactFields>[] =>
  planBatch(body, { key: 'contacts', noun: 'contact', itemKeys: ITEM_KEYS, maxItems: CONTACT_BATCH_LIMITS.maxItems, fieldsOf: contactFields });

export interface AddContact extends ContactFields { contactId: string; tenantId: string; listId: string; now: Date }

export function decideAdd(state: ContactState, cmd: AddContact): ContactEvent[] {
  if (state.present) {
    throw fail('contact_exists', 409, 'This address is already on the list', { nextAction: 'Read the existing contact', details: { contactId: cmd.contactId } });
  }
  return [{
    type: 'ContactAdded',
    data: { contactId: cmd.contactId, tenantId: cmd.tenantId, listId: cmd.listId, email: cmd.email, name: cmd.name, fields: cmd.fields, addedAt: cmd.now.toISOString() },
  }];
}

/** A removal of a contact that is not on the list (never added, removed already, or another tenant's) is 404 contact_not_found. */
export function decideRemove(state: ContactState, cmd: { contactId: string; tenantId: string; listId: string; now: Date }): ContactEvent[] {
  if (!state.present || state.tenantId !== cmd.tenantId || state.listId !== cmd.listId || state.email === null) throw contactNotFound();
  return [{ type: 'ContactRemoved', data: { contactId: cmd.contactId, tenantId: cmd.tenantId, listId: cmd.listId, email: state.email, removedAt: cmd.now.toISOString() } }];
}

/**
 * An unsubscribe through the contact's link. Idempotent: once unsubscribed (since the last add),
 * nothing more is recorded. A contact removed from the list after it was mailed can still use the
 * link: the address is recorded as unsubscribed (a suppression for the tenant) though no contact
 * row shows it. Null: the stream never had the contact (a token for nothing; cannot happen with
 * tokens Motor signed for contacts it has).
 */
export function decideUnsubscribe(state: ContactState, cmd: { contactId: string; tenantId: string; listId: string; via: 'one_click' | 'page'; now: Date }): ContactEvent[] | null {
  if (state.email === null || state.tenantId !== cmd.tenantId || state.listId !== cmd.listId) return null;
  if (state.unsubscribed) return [];
  return [{
    type: 'ContactUnsubscribed',
    data: { contactId: cmd.contactId, tenantId: cmd.tenantId, listId: cmd.listId, email: state.email, via: cmd.via, unsubscribedAt: cmd.now.toISOString() },
  }];
}

export const contactNotFound = () => fail('contact_not_found', 404, 'No such contact on this list');
