import { expect } from 'chai';
import type { DomainError } from '../../domain/errors';
import { contactListChanges, decideCreate, decideDelete, decideUpdate, evolve, fold, initialContactLists, LIST_LIMITS, type ContactListEvent } from '../../domain/comms/contactLists';

const TENANT = '11111111-1111-4111-8111-111111111111';
const NOW = new Date('2026-03-01T12:00:00Z');
const AT = NOW.toISOString();
const created = (listId: string, name: string, description: string | null = null): ContactListEvent => ({ type: 'ContactListCreated', data: { listId, tenantId: TENANT, name, description, createdAt: AT } });
const deleted = (listId: string): ContactListEvent => ({ type: 'ContactListDeleted', data: { listId, tenantId: TENANT, deletedAt: AT } });
const updated = (listId: string, name: string, description: string | null = null): ContactListEvent => ({ type: 'ContactListUpdated', data: { listId, tenantId: TENANT, name, description, updatedAt: AT } });
const errorOf = (fn: () => unknown): DomainError | null => {
  try { fn(); } catch (e) { return e as DomainError; }
  return null;
};

/** The pure rules of renaming and deleting lists (docs/COMMUNICATIONS.md "Lists"): given events, when a command, then events. */
describe('contact lists: rename and delete (unit)', () => {
  const rename = (given: ContactListEvent[], listId: string, changes: { name?: string; description?: string | null }) =>
    decideUpdate(fold(given), { ...changes, listId, tenantId: TENANT, now: NOW });
  const remove = (given: ContactListEvent[], listId: string, campaignsUnderWay: string[] = []) =>
    decideDelete(fold(given), { listId, tenantId: TENANT, campaignsUnderWay, now: NOW });

  it('rename: ContactListUpdated with the whole name and description after it', () => {
    expect(rename([created('l1', 'Old', 'd')], 'l1', { name: 'New' })).to.deep.equal([updated('l1', 'New', 'd')]);
    expect(rename([created('l1', 'Old', 'd')], 'l1', { description: null })).to.deep.equal([updated('l1', 'Old', null)]);
  });

  it('a change of nothing: no event; its own name in another case: an event', () => {
    expect(rename([created('l1', 'Old', 'd')], 'l1', { name: 'Old', description: 'd' })).to.deep.equal([]);
    expect(rename([created('l1', 'Old')], 'l1', { description: null })).to.deep.equal([]);
    expect(rename([created('l1', 'Old')], 'l1', { name: 'OLD' })).to.deep.equal([updated('l1', 'OLD')]);
  });

  it('another live list\'s name: list_name_taken with its id; a renamed or deleted list\'s old name is free', () => {
    const e = errorOf(() => rename([created('l1', 'A'), created('l2', 'B')], 'l2', { name: ' a ' }));
    expect([e?.code, e?.status, (e?.details as { listId: string }).listId]).to.deep.equal(['list_name_taken', 409, 'l1']);
    expect(rename([created('l1', 'A'), updated('l1', 'C'), created('l2', 'B')], 'l2', { name: 'A' })).to.have.length(1);
    expect(rename([created('l1', 'A'), deleted('l1'), created('l2', 'B')], 'l2', { name: 'A' })).to.have.length(1);
    expect(decideCreate(fold([created('l1', 'A'), deleted('l1')]), { listId: 'l3', tenantId: TENANT, name: 'a', description: null, now: NOW })).to.have.length(1);
    expect(errorOf(() => decideCreate(fold([created('l1', 'A'), updated('l1', 'C')]), { listId: 'l3', tenantId: TENANT, name: 'c', description: null, now: NOW }))?.code).to.equal('list_name_taken');
  });

  it('unknown or deleted list: list_not_found, for a rename and a delete', () => {
    for (const given of [[], [created('l1', 'A'), deleted('l1')]]) {
      expect(errorOf(() => rename(given, 'l1', { name: 'X' }))?.code).to.equal('list_not_found');
      expect(errorOf(() => remove(given, 'l1'))?.code).to.equal('list_not_found');
    }
  });

  it('delete: ContactListDeleted; list_in_use with the campaigns under way', () => {
    expect(remove([created('l1', 'A')], 'l1')).to.deep.equal([deleted('l1')]);
    const e = errorOf(() => remove([created('l1', 'A')], 'l1', ['c1', 'c2']));
    expect([e?.code, e?.status, (e?.details as { campaignIds: string[] }).campaignIds]).to.deep.equal(['list_in_use', 409, ['c1', 'c2']]);
  });

  it(`the cap of ${LIST_LIMITS.perTenant} counts live lists only`, () => {
    const full = Array.from({ length: LIST_LIMITS.perTenant }, (_, i) => created(`l${i}`, `List ${i}`));
    const create = (given: ContactListEvent[]) => () => decideCreate(fold(given), { listId: 'new', tenantId: TENANT, name: 'One more', description: null, now: NOW });
    expect(errorOf(create(full))?.code).to.equal('list_limit_reached');
    expect(create([...full, deleted('l3')])()).to.have.length(1);
  });

  it('changes: the create\'s rules; name null or nothing given is validation_error', () => {
    expect(contactListChanges({ name: ' A ', description: '  ' })).to.deep.equal({ name: 'A', description: null });
    expect(contactListChanges({ description: null })).to.deep.equal({ description: null });
    for (const [body, field] of [[{}, 'name'], [{ name: null }, 'name'], [{ name: '' }, 'name'], [{ name: 'x'.repeat(101) }, 'name'], [{ description: 5 }, 'description']] as const) {
      const e = errorOf(() => contactListChanges(body));
      expect([e?.code, (e?.details as { field: string }).field], JSON.stringify(body)).to.deep.equal(['validation_error', field]);
    }
    expect(errorOf(() => contactListChanges([]))?.code).to.equal('validation_error');
  });

  it('fold (one pair of maps for the whole stream) reads a stream as evolve does event by event, and leaves earlier states alone', () => {
    // Creates, renames (to a name another list had), deletes, a rename and a delete of a deleted list.
    const stream: ContactListEvent[] = [];
    for (let i = 0; i < 40; i++) {
      const id = `l${i % 7}`;
      const step = (i * 5) % 4;
      stream.push(step === 0 ? created(id, `N${i}`) : step === 1 ? updated(id, `N${(i + 3) % 11}`, `d${i}`) : step === 2 ? deleted(id) : updated(`l${(i + 1) % 7}`, `R${i}`));
    }
    const states = [initialContactLists()];
    for (const e of stream) states.push(evolve(states[states.length - 1], e));
    for (let n = 0; n <= stream.length; n++) {
      const folded = fold(stream.slice(0, n));
      expect([...folded.lists], `after ${n} events`).to.deep.equal([...states[n].lists]);
      expect([...folded.names], `after ${n} events`).to.deep.equal([...states[n].names]);
    }
    expect(states[0].lists.size).to.equal(0);
    expect(states[1].lists.size).to.equal(1);
  });
});
