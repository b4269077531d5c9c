import { expect } from 'chai';
import { addContactsBatch } from '../../commands/comms/contacts';
import { isDomainError } from '../../domain/errors';
import { CONTACT_BATCH_LIMITS, contactIdOf } from '../../domain/comms/contacts';
import { CONTACTS_SCHEMA } from '../../projections/contacts/projection';
import { startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, commUrl, storeFailingAfter, tenant, type Tenant } from './support';

/**
 * Batch import of contacts (docs/COMMUNICATIONS.md "Batch import"): per-item outcomes (added,
 * exists, invalid with the single add's own error, duplicate), a re-add after removal, the body's
 * shape and size, 1,000 contacts in one call visible to the next GET, the list cap checked for the
 * whole batch before anything is written, the tenant rules, retries and concurrent batches that
 * overlap (each address added once overall, one ContactAdded on its stream).
 */
describe('communications contacts: batch import (int)', function () {
  this.timeout(180_000);
  let motor: TestMotor;
  let a: Tenant;
  let b: Tenant;

  before(async () => {
    motor = await startTestMotor();
    a = await tenant(motor, 'batch-a@example.test');
    b = await tenant(motor, 'batch-b@example.test');
  });
  after(async () => { await motor?.close(); });

  const mkList = async (who: Tenant, name: string) => {
    const r = await commPost(motor, '/lists', { name }, as(who));
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
    return r.body.data.id as string;
  };
  const batch = (listId: string, body: unknown, who: Tenant = a, headers = as(who)) => commPost(motor, `/lists/${listId}/contacts/batch`, body, headers);
  const add = (listId: string, body: unknown, who: Tenant = a) => commPost(motor, `/lists/${listId}/contacts`, body, as(who));
  const get = (path: string, who: Tenant = a) => commGet(motor, path, as(who));
  /** Every contact on the list through the API (pages of 500). */
  const allContacts = async (listId: string, who: Tenant = a) => {
    const out: Array<{ id: string; email: string; name: string | null; fields: Record<string, string> }> = [];
    for (let cursor: string | null = null; ;) {
      const r = await get(`/lists/${listId}/contacts?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, who);
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      out.push(...r.body.data.items);
      cursor = r.body.data.next_cursor;
      if (cursor === null) return out;
    }
  };
  const countOf = async (listId: string, who: Tenant = a) =>
    (await get('/lists?limit=100', who)).body.data.items.find((l: { id: string }) => l.id === listId).contact_count as number;
  const addedEvents = async (contactId: string) => (await motor.rt.store.readStream(`contact-${contactId}`)).map((e) => e.type);

  it('a mixed batch: exact outcome per item, the single add\'s validation, duplicates, existing, a re-add after removal', async () => {
    const list = await mkList(a, 'Mixed');
    const existing = await add(list, { email: 'old@example.com', name: 'Old' });
    expect(existing.status).to.equal(201);
    const removed = await add(list, { email: 'gone@example.com', name: 'Before' });
    const del = await fetch(commUrl(motor, `/lists/${list}/contacts/${removed.body.data.id}`), { method: 'DELETE', headers: as(a) });
    expect(del.status).to.equal(200);

    const invalidBodies: unknown[] = [
      { email: 'nope' }, {}, { email: 42 }, { email: 'n@example.com', name: 'n'.repeat(201) }, { email: 'r@example.com', fields: { name: 'x' } },
      { email: 'f@example.com', fields: { Bad: 'x' } }, { email: 'c@example.com', name: 'a\nb' },
    ];
    const contacts: unknown[] = [
      { email: '  New1@Example.COM ', name: ' One ', fields: { plan: 'pro' } }, // 0 added
      ...invalidBodies, // 1..7 invalid
      5, // 8 invalid: not an object
      { email: 'x@example.com', nmae: 'typo' }, // 9 invalid: unknown property
      { email: 'new1@example.com', name: 'Again' }, // 10 duplicate of 0
      { email: 'OLD@example.com' }, // 11 exists
      { email: 'gone@example.com', name: 'After', fields: { k: 'v' } }, // 12 added again after removal
      { email: 'new2@example.com', name: null }, // 13 added
      { email: 'NEW2@example.com ' }, // 14 duplicate of 13
    ];
    const r = await batch(list, { contacts });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.success).to.equal(true);
    const id = (e: string) => contactIdOf(a.accountId, list, e);
    const d = r.body.data;
    expect({ added: d.added, existing: d.existing, invalid: d.invalid, duplicates: d.duplicates }).to.deep.equal({ added: 3, existing: 1, invalid: 9, duplicates: 2 });
    const summary = d.items.map((i: { index: number; status: string; email: string | null; contact_id?: string; error?: { field?: string } }) =>
      [i.index, i.status, i.email, i.contact_id ?? null, i.error?.field ?? null]);
    expect(summary).to.deep.equal([
      [0, 'added', 'new1@example.com', id('new1@example.com'), null],
      [1, 'invalid', 'nope', null, 'email'], [2, 'invalid', null, null, 'email'], [3, 'invalid', null, null, 'email'],
      [4, 'invalid', 'n@example.com', null, 'name'], [5, 'invalid', 'r@example.com', null, 'fields'], [6, 'invalid', 'f@example.com', null, 'fields'],
      [7, 'invalid', 'c@example.com', null, 'name'],
      [8, 'invalid', null, null, null], [9, 'invalid', 'x@example.com', null, 'nmae'],
      [10, 'duplicate', 'new1@example.com', id('new1@example.com'), null],
      [11, 'exists', 'old@example.com', existing.body.data.id, null],
      [12, 'added', 'gone@example.com', removed.body.data.id, null],
      [13, 'added', 'new2@example.com', id('new2@example.com'), null],
      [14, 'duplicate', 'new2@example.com', id('new2@example.com'), null],
    ]);
    // Each invalid item carries exactly what the single add answers for the same body.
    for (const [k, body] of invalidBodies.entries()) {
      const single = await add(list, body);
      expect(single.status).to.equal(400);
      expect(d.items[k + 1].error, JSON.stringify(body)).to.deep.equal({ code: single.body.code, message: single.body.message, field: single.body.field });
    }
    expect(d.items[8].error.code).to.equal('validation_error');
    expect(d.items[9].error.code).to.equal('validation_error');

    // Read-your-writes: the next GET shows every added contact with what the batch said.
    const listed = await allContacts(list);
    expect(listed.map((c) => c.email).sort()).to.deep.equal(['gone@example.com', 'new1@example.com', 'new2@example.com', 'old@example.com']);
    const by = (e: string) => listed.find((c) => c.email === e)!;
    expect([by('new1@example.com').name, by('new1@example.com').fields]).to.deep.equal(['One', { plan: 'pro' }]);
    expect([by('gone@example.com').name, by('gone@example.com').fields]).to.deep.equal(['After', { k: 'v' }]);
    expect(by('new2@example.com').name).to.equal(null);
    expect(await countOf(list)).to.equal(4);
    expect(await addedEvents(removed.body.data.id)).to.deep.equal(['ContactAdded', 'ContactRemoved', 'ContactAdded']);
    expect(await addedEvents(existing.body.data.id)).to.deep.equal(['ContactAdded']);
    expect(await addedEvents(id('new1@example.com'))).to.deep.equal(['ContactAdded']);
  });

  it('the body: not {contacts: array}, 0 or over 1,000 items → 400 validation_error (field contacts); not an object or another property → 422; nothing written', async () => {
    const list = await mkList(a, 'Shapes');
    const over = Array.from({ length: CONTACT_BATCH_LIMITS.maxItems + 1 }, (_, i) => ({ email: `over${i}@example.com` }));
    for (const body of [{}, { contacts: null }, { contacts: 'a@example.com' }, { contacts: { email: 'a@example.com' } }, { contacts: [] }, { contacts: over }]) {
      const r = await batch(list, body);
      expect([r.status, r.body.success, r.body.code, r.body.field], JSON.stringify(body).slice(0, 80)).to.deep.equal([400, false, 'validation_error', 'contacts']);
    }
    for (const body of [[{ email: 'a@example.com' }], { contacts: [{ email: 'a@example.com' }], extra: 1 }]) {
      const r = await batch(list, body);
      expect([r.status, r.body.code], JSON.stringify(body)).to.deep.equal([422, 'validation_error']);
    }
    expect((await batch(list, '"text"')).body.code).to.equal('invalid_json');
    // U+0000 or a lone surrogate anywhere: the strict JSON parser refuses the whole body, as on every route.
    for (const bad of [{ email: 'a\u0000@example.com' }, { email: 'a@example.com', name: 'x\ud800' }]) {
      const r = await batch(list, { contacts: [{ email: 'ok@example.com' }, bad] });
      expect([r.status, r.body.code], JSON.stringify(bad)).to.deep.equal([400, 'invalid_json']);
    }
    // Hostile items: each an invalid outcome (never a 5xx), the valid one still added.
    const hostile = await batch(list, { contacts: [
      { email: `${'x'.repeat(1 << 16)}@example.com` }, { email: 'a@example.com', fields: { a: { $ne: 1 } } },
      { email: 'a@example.com', fields: Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, 'v'])) }, null, [], 'a@example.com', { email: 'ok@example.com' },
    ] });
    expect(hostile.status, JSON.stringify(hostile.body).slice(0, 300)).to.equal(200);
    expect(hostile.body.data.items.map((i: { status: string }) => i.status)).to.deep.equal([...Array(6).fill('invalid'), 'added']);
    expect(hostile.body.data.items[0].email, 'an over-long address is not echoed').to.equal(null);
    const polluted = await batch(list, '{"contacts": [{"email": "p@example.com", "fields": {"__proto__": {"x": "1"}}}, {"__proto__": {"email": "q@example.com"}}]}');
    expect(polluted.status).to.be.within(200, 499);
    expect(Object.prototype).not.to.have.property('x');
    expect((await allContacts(list)).map((c) => c.email).filter((e) => e !== 'p@example.com')).to.deep.equal(['ok@example.com']);
  });

  it('1,000 contacts in one call; all listed by the GET right after; the same batch again answers exists and adds nothing', async () => {
    const list = await mkList(a, 'Thousand');
    const contacts = Array.from({ length: CONTACT_BATCH_LIMITS.maxItems }, (_, i) => ({ email: `user${i}@example.com`, name: `User ${i}`, fields: { n: String(i) } }));
    const t0 = Date.now();
    const r = await batch(list, { contacts });
    const ms = Date.now() - t0;
    console.log(`      1,000-contact batch answered in ${ms} ms`); // eslint-disable-line no-console
    expect(r.status, JSON.stringify(r.body).slice(0, 300)).to.equal(200);
    expect([r.body.data.added, r.body.data.existing, r.body.data.invalid, r.body.data.duplicates]).to.deep.equal([1000, 0, 0, 0]);
    const listed = await allContacts(list);
    expect(listed).to.have.length(1000);
    expect(new Set(listed.map((c) => c.email))).to.deep.equal(new Set(contacts.map((c) => c.email)));
    expect(listed.find((c) => c.email === 'user123@example.com')).to.include({ name: 'User 123', id: contactIdOf(a.accountId, list, 'user123@example.com') });
    expect(await countOf(list)).to.equal(1000);

    const again = await batch(list, { contacts });
    expect([again.status, again.body.data.added, again.body.data.existing]).to.deep.equal([200, 0, 1000]);
    expect(again.body.data.items[7]).to.deep.equal({ index: 7, email: 'user7@example.com', status: 'exists', contact_id: contactIdOf(a.accountId, list, 'user7@example.com') });
    expect(await addedEvents(contactIdOf(a.accountId, list, 'user7@example.com'))).to.deep.equal(['ContactAdded']);
    expect(await countOf(list)).to.equal(1000);
  });

  it('the cap: a batch that would pass it is 409 contact_limit_reached (limit, remaining) and writes nothing; addresses already there do not count', async () => {
    const list = await mkList(a, 'Capped');
    const deps = { store: motor.rt.store, db: motor.rt.db, clock: motor.rt.clock, logger: motor.rt.logger, metrics: motor.rt.metrics };
    const run = (emails: string[]) => addContactsBatch(deps, a.accountId, `user:test`, list, { contacts: emails.map((email) => ({ email })) }, { perList: 5 });
    expect((await run(['c1@example.com', 'c2@example.com', 'c3@example.com'])).added).to.equal(3);

    const refused = await run(['c1@example.com', 'c4@example.com', 'c5@example.com', 'c6@example.com']).then(() => null, (err: unknown) => err);
    expect(isDomainError(refused) && [refused.status, refused.code, refused.details]).to.deep.equal([409, 'contact_limit_reached', { limit: 5, remaining: 2 }]);
    for (const e of ['c4@example.com', 'c5@example.com', 'c6@example.com']) {
      expect(await motor.rt.store.readStream(`contact-${contactIdOf(a.accountId, list, e)}`), `${e} has no stream`).to.deep.equal([]);
    }
    expect(await countOf(list)).to.equal(3);

    // Exactly to the cap (existing and invalid items do not count), then only existing ones at the cap.
    const fits = await run(['c1@example.com', 'c4@example.com', 'c5@example.com', 'not-an-address']);
    expect([fits.added, fits.existing, fits.invalid]).to.deep.equal([2, 1, 1]);
    const atCap = await run(['c2@example.com', 'C3@example.com']);
    expect([atCap.added, atCap.existing]).to.deep.equal([0, 2]);
    expect(await countOf(list)).to.equal(5);

    // Over HTTP with the real cap: the read model's count of a list near it (set for this test).
    const big = await mkList(a, 'Nearly full');
    await motor.rt.db.withSchema(CONTACTS_SCHEMA).table('list_sizes').insert({ list_id: big, contact_count: 99_999 });
    const r = await batch(big, { contacts: [{ email: 'h1@example.com' }, { email: 'h2@example.com' }] });
    expect([r.status, r.body.success, r.body.code, r.body.limit, r.body.remaining]).to.deep.equal([409, false, 'contact_limit_reached', 100_000, 1]);
    expect(await allContacts(big)).to.deep.equal([]);
    expect((await batch(big, { contacts: [{ email: 'h1@example.com' }] })).body.data.added).to.equal(1);
  });

  it('a batch that fails midway keeps what it appended; the same batch again answers those exists and adds the rest', async () => {
    const list = await mkList(a, 'Crash');
    // The event store goes away after 40 appends (as a crash of this process would leave them).
    const failing = storeFailingAfter(motor.rt.store, 40);
    const contacts = Array.from({ length: 100 }, (_, i) => ({ email: `crash${i}@example.com` }));
    const deps = { store: failing, db: motor.rt.db, clock: motor.rt.clock, logger: motor.rt.logger, metrics: motor.rt.metrics };
    const err = await addContactsBatch(deps, a.accountId, 'user:test', list, { contacts }).then(() => null, (e: unknown) => e);
    expect((err as Error)?.message).to.equal('event store gone');
    const written = (await Promise.all(contacts.map(async (c) => (await motor.rt.store.readStream(`contact-${contactIdOf(a.accountId, list, c.email)}`)).length))).filter((n) => n > 0);
    expect(written, 'the 40 appends that succeeded are kept, each one event').to.deep.equal(Array(40).fill(1));

    const retry = await batch(list, { contacts });
    expect([retry.status, retry.body.data.added, retry.body.data.existing]).to.deep.equal([200, 60, 40]);
    expect(await allContacts(list)).to.have.length(100);
    expect(await countOf(list)).to.equal(100);
  });

  it('tenant rules: header and JWT checked, another tenant\'s or an unknown list is 404 list_not_found, nothing written', async () => {
    const listA = await mkList(a, 'Isolated A');
    const listB = await mkList(b, 'Isolated B');
    const body = { contacts: [{ email: 'iso@example.com' }] };
    const none = await batch(listA, body, a, as(a, null));
    expect([none.status, none.body.code]).to.deep.equal([400, 'tenant_required']);
    const other = await batch(listA, body, a, as(a, b.accountId));
    expect([other.status, other.body.code]).to.deep.equal([403, 'tenant_forbidden']);
    expect((await batch(listA, body, a, { 'x-tenant-id': a.accountId })).status).to.equal(401);
    expect((await batch(listA, body, a, { 'x-tenant-id': a.accountId, authorization: 'Bearer not.a.jwt' })).status).to.equal(401);
    for (const list of [listB, '0193a5f0-0000-7000-8000-00000000abcd', 'not-a-uuid']) {
      const r = await batch(list, body);
      expect([r.status, r.body.code], list).to.deep.equal([404, 'list_not_found']);
    }
    const byB = await batch(listA, body, b);
    expect([byB.status, byB.body.code]).to.deep.equal([404, 'list_not_found']);
    expect(await allContacts(listA)).to.deep.equal([]);
    expect(await allContacts(listB, b)).to.deep.equal([]);
    // The same address on each tenant's own list: two contacts.
    const ra = await batch(listA, body);
    const rb = await batch(listB, body, b);
    expect([ra.body.data.added, rb.body.data.added]).to.deep.equal([1, 1]);
    expect(ra.body.data.items[0].contact_id).not.to.equal(rb.body.data.items[0].contact_id);
  });

  it('concurrent batches with overlapping addresses: each address added exactly once overall, one ContactAdded each', async () => {
    const list = await mkList(a, 'Concurrent');
    // Four batches of 200 over 500 addresses: each address is in one or two batches, in different cases.
    const batches = [0, 100, 200, 300].map((start, k) => Array.from({ length: 200 }, (_, i) => ({ email: k % 2 ? `Race${start + i}@Example.com` : `race${start + i}@example.com` })));
    const rs = await Promise.all(batches.map((contacts) => batch(list, { contacts })));
    for (const r of rs) expect(r.status, JSON.stringify(r.body).slice(0, 300)).to.equal(200);
    const addedBy = new Map<string, number>();
    for (const r of rs) {
      for (const i of r.body.data.items) {
        expect(['added', 'exists'], JSON.stringify(i)).to.include(i.status);
        if (i.status === 'added') addedBy.set(i.email, (addedBy.get(i.email) ?? 0) + 1);
      }
    }
    expect(addedBy.size).to.equal(500);
    expect([...addedBy.values()].every((n) => n === 1)).to.equal(true);
    expect(rs.reduce((s, r) => s + r.body.data.added, 0)).to.equal(500);
    expect(rs.reduce((s, r) => s + r.body.data.existing, 0)).to.equal(300);
    expect(await allContacts(list)).to.have.length(500);
    expect(await countOf(list)).to.equal(500);
    for (const n of [0, 150, 250, 399, 499]) expect(await addedEvents(contactIdOf(a.accountId, list, `race${n}@example.com`))).to.deep.equal(['ContactAdded']);
  });
});
