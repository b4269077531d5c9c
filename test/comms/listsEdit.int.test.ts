import { expect } from 'chai';
import { streamName, type RecordedEvent } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { contactIdOf } from '../../domain/comms/contacts';
import { LIST_LIMITS } from '../../domain/comms/contactLists';
import { unsubscribeSecret, unsubscribeToken } from '../../domain/comms/unsubscribe';
import { CAMPAIGNS_SCHEMA } from '../../projections/campaigns/projection';
import { contactListsProjection, CONTACT_LISTS_SCHEMA } from '../../projections/contactLists/projection';
import { contactsProjection, CONTACTS_SCHEMA } from '../../projections/contacts/projection';
import { contactsForCampaign } from '../../projections/contacts/queries';
import { migrateProjection } from '../../projections/runner';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, commUrl, tenant, type Tenant } from './support';

/**
 * Reading one list, renaming and deleting lists (docs/COMMUNICATIONS.md "Lists"): the tenant rule,
 * 404 for unknown, malformed, deleted and other tenants' lists, the create's field rules on PATCH,
 * names unique among the live lists under concurrent renames, a change of nothing appends nothing,
 * list_in_use while a campaign is scheduled or sending, what a deletion frees (the name, a place
 * under the cap) and removes (every contact route, the contacts, the count), the read models'
 * tombstone against contact events applied after the delete, and both read models on replay.
 * No sender runs (roles api and projector), so a campaign appended as sending stays sending.
 */
describe('communications lists: read one, rename, delete (int)', function () {
  this.timeout(180_000);
  let motor: TestMotor;
  let a: Tenant;
  let b: Tenant;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    a = await tenant(motor, 'listsedit-a@example.test');
    b = await tenant(motor, 'listsedit-b@example.test');
  });
  after(async () => { await motor?.close(); });

  type Answer = { status: number; body: any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  const send = async (method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> => {
    const res = await fetch(commUrl(motor, path), {
      method, headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
  const create = async (name: string, who: Tenant = a, description?: string) => {
    const r = await commPost(motor, '/lists', { name, description }, as(who));
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
    return r.body.data as { id: string; name: string; description: string | null; created_at: string; updated_at: string };
  };
  const getOne = (id: string, who: Tenant = a) => commGet(motor, `/lists/${id}`, as(who));
  const patch = (id: string, body: unknown, who: Tenant = a) => send('PATCH', `/lists/${id}`, as(who), body);
  const remove = (id: string, who: Tenant = a) => send('DELETE', `/lists/${id}`, as(who));
  const page = async (who: Tenant = a) => (await commGet(motor, '/lists?limit=100', as(who))).body.data.items as Array<{ id: string; name: string }>;
  const listStream = (who: Tenant) => motor.rt.store.readStream(streamName('contactLists', who.accountId));
  const addContact = async (listId: string, email: string) => {
    const r = await commPost(motor, `/lists/${listId}/contacts`, { email }, as(a));
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
    return r.body.data as { id: string };
  };

  it('every new route: 400 tenant_required, 403 tenant_forbidden, 401 without or with a bad JWT', async () => {
    const l = await create('Tenant rule');
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      const call = (headers: Record<string, string>) => send(method, `/lists/${l.id}`, headers, method === 'PATCH' ? { name: 'Changed' } : undefined);
      const none = await call(as(a, null));
      expect([none.status, none.body.code], `${method} without header`).to.deep.equal([400, 'tenant_required']);
      const other = await call(as(a, b.accountId));
      expect([other.status, other.body.code], `${method} other tenant`).to.deep.equal([403, 'tenant_forbidden']);
      expect((await call({ 'x-tenant-id': a.accountId })).status, `${method} without JWT`).to.equal(401);
      expect((await call({ 'x-tenant-id': a.accountId, authorization: 'Bearer not.a.jwt' })).status, `${method} bad JWT`).to.equal(401);
    }
    const after = await getOne(l.id);
    expect([after.status, after.body.data.name], 'the refused calls changed nothing').to.deep.equal([200, 'Tenant rule']);
  });

  it('GET /lists/{id}: the record of GET /lists; an id in capitals is the same list; unknown, malformed or another tenant\'s: 404 list_not_found', async () => {
    const l = await create('  Readers ', a, ' People who read ');
    const one = await getOne(l.id);
    expect(one.status).to.equal(200);
    expect(one.body).to.deep.equal({ success: true, data: { ...l, contact_count: 0 } });
    expect(one.body.data).to.deep.equal((await page()).find((x) => x.id === l.id));
    await addContact(l.id, 'reader@example.com');
    expect((await getOne(l.id)).body.data.contact_count).to.equal(1);
    expect((await getOne(l.id.toUpperCase())).body.data).to.deep.equal((await getOne(l.id)).body.data);
    for (const id of [newId(), 'not-a-uuid', `${l.id}x`, '%20']) {
      for (const r of [await getOne(id), await patch(id, { name: 'X' }), await remove(id)]) {
        expect([r.status, r.body.code], id).to.deep.equal([404, 'list_not_found']);
      }
    }
    // The contact routes answer the same for a malformed list id.
    expect((await commGet(motor, '/lists/not-a-uuid/contacts', as(a))).body.code).to.equal('list_not_found');
    for (const r of [await getOne(l.id, b), await patch(l.id, { name: 'Taken over' }, b), await remove(l.id, b)]) {
      expect([r.status, r.body.code], 'another tenant').to.deep.equal([404, 'list_not_found']);
    }
    expect((await getOne(l.id)).body.data.name, 'untouched by the other tenant').to.equal('Readers');
  });

  it('PATCH validation: the create\'s rules (400 validation_error with field; 422 for a non-object or another property); nothing appended', async () => {
    const l = await create('Validated');
    const before = (await listStream(a)).length;
    const cases: Array<[unknown, string]> = [
      [{}, 'name'], [{ name: null }, 'name'], [{ name: '   ' }, 'name'], [{ name: 42 }, 'name'], [{ name: 'x'.repeat(LIST_LIMITS.nameMax + 1) }, 'name'],
      [{ name: 'two\nlines' }, 'name'], [{ name: 'a\u0085b' }, 'name'], [{ description: 7 }, 'description'], [{ name: 'ok', description: 'd'.repeat(LIST_LIMITS.descriptionMax + 1) }, 'description'],
      [{ description: ['x'] }, 'description'],
    ];
    for (const [body, field] of cases) {
      const r = await patch(l.id, body);
      expect([r.status, r.body.code, r.body.field], JSON.stringify(body)).to.deep.equal([400, 'validation_error', field]);
    }
    for (const body of [[{ name: 'x' }], { name: 'Extra', colour: 'red' }]) {
      const r = await patch(l.id, body);
      expect([r.status, r.body.code], JSON.stringify(body)).to.deep.equal([422, 'validation_error']);
    }
    // A bare JSON value is refused by the strict parser of every route, as for the create.
    const created = await commPost(motor, '/lists', 'a string', as(a));
    const patched = await patch(l.id, 'a string');
    expect([patched.status, patched.body.code]).to.deep.equal([created.status, created.body.code]).and.to.deep.equal([400, 'invalid_json']);
    expect((await listStream(a)).length).to.equal(before);
    expect((await getOne(l.id)).body.data).to.deep.include({ name: 'Validated', description: null });
    // The limits themselves are allowed (counted in characters).
    const max = await patch(l.id, { name: 'é'.repeat(LIST_LIMITS.nameMax), description: 'd'.repeat(LIST_LIMITS.descriptionMax) });
    expect(max.status, JSON.stringify(max.body)).to.equal(200);
  });

  it('PATCH: renames and describes (trimmed), updated_at moves, read-your-writes; null or "" clears the description; a change of nothing appends nothing', async () => {
    const l = await create('Original', a, 'First words');
    await addContact(l.id, 'p1@example.com');
    await new Promise((r) => setTimeout(r, 5));
    const renamed = await patch(l.id, { name: '  Renamed  ' });
    expect(renamed.status, JSON.stringify(renamed.body)).to.equal(200);
    expect(renamed.body.data).to.include({ id: l.id, name: 'Renamed', description: 'First words', contact_count: 1, created_at: l.created_at });
    expect(renamed.body.data.updated_at > l.updated_at, 'updated_at moves').to.equal(true);
    expect((await getOne(l.id)).body.data, 'the next GET shows it').to.deep.equal(renamed.body.data);
    expect((await page()).find((x) => x.id === l.id), 'and the page').to.deep.equal(renamed.body.data);

    const described = await patch(l.id.toUpperCase(), { description: '  Second words ' });
    expect(described.body.data).to.include({ id: l.id, name: 'Renamed', description: 'Second words' });
    for (const clear of [null, '', '   ']) {
      await patch(l.id, { description: 'something' });
      const r = await patch(l.id, { description: clear });
      expect([r.status, r.body.data.description], JSON.stringify(clear)).to.deep.equal([200, null]);
    }

    const at = (await listStream(a)).length;
    const current = (await getOne(l.id)).body.data;
    for (const body of [{ name: 'Renamed' }, { name: ' Renamed ', description: null }, { description: '' }]) {
      const same = await patch(l.id, body);
      expect([same.status, same.body.data], JSON.stringify(body)).to.deep.equal([200, current]);
    }
    expect((await listStream(a)).length, 'nothing appended').to.equal(at);

    const event = (await listStream(a)).filter((e) => e.type === 'ContactListUpdated').pop()!;
    expect(event.data).to.deep.equal({ listId: l.id, tenantId: a.accountId, name: 'Renamed', description: null, updatedAt: current.updated_at });
  });

  it('PATCH names: unique among the other live lists (409 list_name_taken with listId); its own name in another case is allowed; the old name is free', async () => {
    const first = await create('Alpha list');
    const second = await create('Beta list');
    for (const name of ['alpha list', ' ALPHA  LIST ', 'Ａｌｐｈａ list']) {
      const r = await patch(second.id, { name });
      expect([r.status, r.body.code, r.body.listId], name).to.deep.equal([409, 'list_name_taken', first.id]);
    }
    const own = await patch(second.id, { name: 'BETA LIST' });
    expect([own.status, own.body.data.name]).to.deep.equal([200, 'BETA LIST']);
    expect((await patch(first.id, { name: 'Gamma list' })).status).to.equal(200);
    expect((await commPost(motor, '/lists', { name: 'alpha LIST' }, as(a))).status, 'the old name is free').to.equal(201);
    expect((await patch(first.id, { name: 'Beta list' })).body.code, 'taken by the renamed one').to.equal('list_name_taken');
    expect((await patch(first.id, { name: 'Beta list' }, b)).body.code, 'another tenant: 404, not 409').to.equal('list_not_found');
    await create('Beta list', b);
  });

  it('concurrent renames to one name: exactly one 200, the others 409 list_name_taken; a concurrent create of it too', async () => {
    const lists = await Promise.all(Array.from({ length: 6 }, (_, i) => create(`Contender ${i}`)));
    const [renames, creates] = await Promise.all([
      Promise.all(lists.map((l) => patch(l.id, { name: spelling('Winner', l.id) }))),
      Promise.all([commPost(motor, '/lists', { name: 'WINNER' }, as(a))]),
    ]);
    const all = [...renames, ...creates];
    expect(all.filter((r) => r.status === 200 || r.status === 201), JSON.stringify(all.map((r) => r.body.code))).to.have.length(1);
    expect(all.filter((r) => r.status === 409).every((r) => r.body.code === 'list_name_taken')).to.equal(true);
    const winners = (await page()).filter((x) => x.name.toLowerCase() === 'winner');
    expect(winners).to.have.length(1);
    // Different names all succeed at once.
    const distinct = await Promise.all(lists.map((l, i) => patch(l.id, { name: `Distinct ${i}` })));
    expect(distinct.map((r) => r.status)).to.deep.equal([200, 200, 200, 200, 200, 200]);
  });

  it('DELETE: 200 {id, deleted}; then 404 on every route of the list and its contacts; gone from the page, the counts and the campaign walk; the name is free', async () => {
    const l = await create('Doomed');
    const ann = await addContact(l.id, 'ann@example.com');
    const bob = await addContact(l.id, 'bob@example.com');
    // Bob unsubscribes before the delete: the suppression is the tenant's and stays.
    const token = unsubscribeToken(unsubscribeSecret(motor.config.tokenSecret), { tenantId: a.accountId, listId: l.id, contactId: bob.id });
    const unsub = await fetch(`${motor.baseUrl}/comm-api/u/${token}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
    expect(unsub.status).to.equal(200);
    await eventually(async () => (await commGet(motor, '/suppressions?email=bob@example.com', as(a))).body.data.items.length === 1);

    const r = await remove(l.id.toUpperCase());
    expect([r.status, r.body]).to.deep.equal([200, { success: true, data: { id: l.id, deleted: true } }]);
    const e = (await listStream(a)).pop()!;
    expect([e.type, e.data]).to.deep.equal(['ContactListDeleted', { listId: l.id, tenantId: a.accountId, deletedAt: (e.data as { deletedAt: string }).deletedAt }]);

    expect((await getOne(l.id)).body.code).to.equal('list_not_found');
    expect((await remove(l.id)).body.code, 'a second DELETE').to.equal('list_not_found');
    expect((await patch(l.id, { name: 'Back' })).body.code).to.equal('list_not_found');
    expect((await page()).map((x) => x.id)).to.not.include(l.id);
    const contactRoutes: Answer[] = [
      await commPost(motor, `/lists/${l.id}/contacts`, { email: 'carl@example.com' }, as(a)),
      await commPost(motor, `/lists/${l.id}/contacts/batch`, { contacts: [{ email: 'dora@example.com' }] }, as(a)),
      await commGet(motor, `/lists/${l.id}/contacts`, as(a)),
      await commGet(motor, `/lists/${l.id}/contacts/${ann.id}`, as(a)),
      await send('PATCH', `/lists/${l.id}/contacts/${ann.id}`, as(a), { name: 'Ann' }),
      await send('DELETE', `/lists/${l.id}/contacts/${ann.id}`, as(a)),
    ];
    expect(contactRoutes.map((x) => [x.status, x.body.code])).to.deep.equal(Array(6).fill([404, 'list_not_found']));

    // The read models, once the contacts projector has the delete.
    await eventually(async () => (await motor.rt.db.withSchema(CONTACTS_SCHEMA).table('deleted_lists').where({ list_id: l.id })).length === 1);
    expect(await motor.rt.db.withSchema(CONTACTS_SCHEMA).table('list_sizes').where({ list_id: l.id })).to.deep.equal([]);
    expect(await motor.rt.db.withSchema(CONTACTS_SCHEMA).table('contacts').where({ list_id: l.id }).whereNull('removed_at')).to.deep.equal([]);
    expect(await contactsForCampaign(motor.rt.db, a.accountId, l.id, null, 100)).to.deep.equal([]);
    expect((await commGet(motor, '/suppressions?email=bob@example.com', as(a))).body.data.items, 'the unsubscribe stays a suppression').to.have.length(1);

    const again = await commPost(motor, '/lists', { name: 'doomed' }, as(a));
    expect(again.status, 'the name is free').to.equal(201);
    expect(again.body.data.id).to.not.equal(l.id);
    expect(again.body.data.contact_count).to.equal(0);
  });

  it('the tombstone: contact events of a deleted list applied after the delete (an add that raced it, a late unsubscribe) add nothing', async () => {
    const l = await create('Raced');
    const kept = await addContact(l.id, 'kept@example.com');
    expect((await remove(l.id)).status).to.equal(200);
    await eventually(async () => (await motor.rt.db.withSchema(CONTACTS_SCHEMA).table('deleted_lists').where({ list_id: l.id })).length === 1);

    // An add that decided before the delete and appended after it: straight into the log.
    const lateId = contactIdOf(a.accountId, l.id, 'late@example.com');
    const added = await motor.rt.store.append(streamName('contact', lateId), [toEventData(newId(), {
      type: 'ContactAdded', data: { contactId: lateId, tenantId: a.accountId, listId: l.id, email: 'late@example.com', name: null, fields: {}, addedAt: new Date().toISOString() },
    }, { actor: 'test' })], { expectedRevision: 'no_stream' });
    // The contact on the list before the delete uses its link afterwards: a suppression, no row back.
    const token = unsubscribeToken(unsubscribeSecret(motor.config.tokenSecret), { tenantId: a.accountId, listId: l.id, contactId: kept.id });
    const started = Date.now();
    const unsub = await fetch(`${motor.baseUrl}/comm-api/u/${token}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
    expect(unsub.status).to.equal(200);
    expect(Date.now() - started, 'its read-your-writes wait ends (the revision moves)').to.be.below(2500);
    await eventually(async () => {
      const row = await motor.rt.db.withSchema(CONTACTS_SCHEMA).table('contacts').where({ id: lateId }).first('revision');
      return row !== undefined && BigInt(row.revision) >= added.nextExpectedRevision;
    });
    const rows = await motor.rt.db.withSchema(CONTACTS_SCHEMA).table('contacts').where({ list_id: l.id }).select('id', 'status', 'removed_at');
    expect(rows.map((x: { id: string }) => x.id).sort()).to.deep.equal([kept.id, lateId].sort());
    expect(rows.every((x: { removed_at: Date | null }) => x.removed_at !== null), 'both removed').to.equal(true);
    expect(rows.find((x: { id: string }) => x.id === kept.id).status, 'the removed row keeps its state').to.equal('subscribed');
    expect(await motor.rt.db.withSchema(CONTACTS_SCHEMA).table('list_sizes').where({ list_id: l.id })).to.deep.equal([]);
    expect(await contactsForCampaign(motor.rt.db, a.accountId, l.id, null, 100)).to.deep.equal([]);
    await eventually(async () => (await commGet(motor, '/suppressions?email=kept@example.com', as(a))).body.data.items.length === 1);
  });

  describe('campaigns', () => {
    let templateId: string;
    before(async () => {
      const t = await commPost(motor, '/templates', { name: 'Lists edit', subject: 'Hi', type: 'text', body_text: 'Hello {{unsubscribe_url}}' }, as(a));
      if (t.status !== 201) throw new Error(JSON.stringify(t.body));
      templateId = t.body.data.id;
    });

    /** A campaign of `a` on `listId`, brought to `status` by its events (no sender runs here). */
    async function campaign(listId: string, status: 'draft' | 'scheduled' | 'sending' | 'sent' | 'cancelled', who: Tenant = a): Promise<string> {
      const id = newId();
      const at = new Date().toISOString();
      const base = { campaignId: id, tenantId: who.accountId };
      const events: DomainEvent[] = [{
        type: 'CampaignCreated',
        data: { ...base, name: `${status} one`, templateId, listId, motorBlockId: who.b.motorBlockId, from: 'news@example.test', fromName: null, trackOpens: false, trackClicks: false, createdAt: at },
      }];
      const started: DomainEvent = { type: 'CampaignSendStarted', data: { ...base, template: { subject: 'Hi', body_html: null, body_text: 'Hello' }, identityName: 'x', startedAt: at } };
      const counts = { recipients: 0, accepted: 0, skippedSuppressed: 0, failed: 0 };
      if (status === 'scheduled') events.push({ type: 'CampaignScheduled', data: { ...base, scheduledAt: new Date(Date.now() + 86_400_000).toISOString(), at } });
      if (status === 'sending' || status === 'sent') events.push(started);
      if (status === 'sent') events.push({ type: 'CampaignSendCompleted', data: { ...base, lastContactId: null, counts, completedAt: at } });
      if (status === 'cancelled') events.push({ type: 'CampaignCancelled', data: { ...base, cancelledAt: at } });
      await motor.rt.store.append(streamName('campaign', id), events.map((e) => toEventData(newId(), e, { actor: 'test' })), { expectedRevision: 'no_stream' });
      await eventually(async () => (await motor.rt.db.withSchema(CAMPAIGNS_SCHEMA).table('campaigns').where({ id, status }).first('id')) !== undefined);
      return id;
    }

    it('409 list_in_use (with campaignIds) while a campaign is scheduled or sending to the list; draft, sent and cancelled ones do not block', async () => {
      const l = await create('Campaigned');
      const scheduled = await campaign(l.id, 'scheduled');
      const sending = await campaign(l.id, 'sending');
      const others = [await campaign(l.id, 'draft'), await campaign(l.id, 'sent'), await campaign(l.id, 'cancelled')];
      const blocked = await remove(l.id);
      expect([blocked.status, blocked.body.code]).to.deep.equal([409, 'list_in_use']);
      expect(blocked.body.campaignIds).to.deep.equal([scheduled, sending].sort());
      expect((await getOne(l.id)).status, 'still there').to.equal(200);

      await motor.rt.store.append(streamName('campaign', scheduled), [toEventData(newId(), { type: 'CampaignCancelled', data: { campaignId: scheduled, tenantId: a.accountId, cancelledAt: new Date().toISOString() } }, { actor: 'test' })], { expectedRevision: 1n });
      await eventually(async () => (await motor.rt.db.withSchema(CAMPAIGNS_SCHEMA).table('campaigns').where({ id: scheduled, status: 'cancelled' })).length === 1);
      expect((await remove(l.id)).body.campaignIds).to.deep.equal([sending]);
      await motor.rt.store.append(streamName('campaign', sending), [toEventData(newId(), {
        type: 'CampaignSendCompleted', data: { campaignId: sending, tenantId: a.accountId, lastContactId: null, counts: { recipients: 0, accepted: 0, skippedSuppressed: 0, failed: 0 }, completedAt: new Date().toISOString() },
      }, { actor: 'test' })], { expectedRevision: 1n });
      await eventually(async () => (await motor.rt.db.withSchema(CAMPAIGNS_SCHEMA).table('campaigns').where({ id: sending, status: 'sent' })).length === 1);
      expect((await remove(l.id)).status, 'nothing under way any more').to.equal(200);

      // The draft that names the deleted list: its send fails with the list check's 404.
      const sendDraft = await commPost(motor, `/campaigns/${others[0]}/send`, {}, as(a));
      expect([sendDraft.status, sendDraft.body.code]).to.deep.equal([404, 'list_not_found']);
      expect((await commGet(motor, `/campaigns/${others[0]}`, as(a))).body.data.status, 'still a draft').to.equal('draft');
      // Another tenant's campaign naming this list's id (it could not through the API) does not block it: the check is per tenant.
      const m = await create('Unblocked');
      await campaign(m.id, 'sending', b);
      expect((await remove(m.id)).status).to.equal(200);
    });
  });

  it(`the cap counts live lists only: at ${LIST_LIMITS.perTenant}, deleting one lets a create in`, async () => {
    const c = await tenant(motor, 'listsedit-c@example.test');
    const t0 = Date.now() - 3_600_000;
    const events: DomainEvent[] = Array.from({ length: LIST_LIMITS.perTenant }, (_, i) => ({
      type: 'ContactListCreated', data: { listId: newId(), tenantId: c.accountId, name: `Seeded ${i}`, description: null, createdAt: new Date(t0 + i * 1000).toISOString() },
    }));
    await motor.rt.store.append(streamName('contactLists', c.accountId), events.map((e) => toEventData(newId(), e, { actor: 'test' })), { expectedRevision: 'no_stream' });
    await eventually(async () => (await page(c)).length === LIST_LIMITS.perTenant);
    const over = await commPost(motor, '/lists', { name: 'One too many' }, as(c));
    expect([over.status, over.body.code]).to.deep.equal([409, 'list_limit_reached']);
    const victim = (events[7].data as { listId: string }).listId;
    expect((await remove(victim, c)).status).to.equal(200);
    expect((await commPost(motor, '/lists', { name: 'One too many' }, as(c))).status).to.equal(201);
    expect((await commPost(motor, '/lists', { name: 'And another' }, as(c))).body.code, 'full again').to.equal('list_limit_reached');
    expect(await page(c)).to.have.length(LIST_LIMITS.perTenant);
    expect((await commPost(motor, '/lists', { name: 'Seeded 7' }, as(c))).body.code, 'the deleted one\'s name is free, but the cap holds').to.equal('list_limit_reached');
  });

  describe('the read models on replay', () => {
    const scratch = { lists: 'rm_contactlists_editreplay', contacts: 'rm_contacts_editreplay' };
    const projections = { lists: contactListsProjection, contacts: contactsProjection };
    const snapshot = async (kind: 'lists' | 'contacts', schema: string) => (kind === 'lists'
      ? { lists: (await motor.rt.db.raw(`select * from "${schema}"."lists" order by id`)).rows }
      : {
        contacts: (await motor.rt.db.raw(`select * from "${schema}"."contacts" order by id`)).rows,
        sizes: (await motor.rt.db.raw(`select * from "${schema}"."list_sizes" order by list_id`)).rows,
        deleted: (await motor.rt.db.raw(`select * from "${schema}"."deleted_lists" order by list_id`)).rows,
      });

    for (const kind of ['lists', 'contacts'] as const) {
      it(`${kind}: applied from zero, twice, in part again, or one event at a time, gives the live rows`, async () => {
        const projection = projections[kind];
        const handled = new Set(projection.handles);
        const events: RecordedEvent[] = [];
        let after: string | null = null;
        for (;;) {
          const batch = await motor.rt.store.readAll({ after, maxCount: 1000 });
          if (batch.length === 0) break;
          events.push(...batch.filter((e) => handled.has(e.type)));
          after = batch[batch.length - 1].position;
        }
        expect(events.some((e) => e.type === 'ContactListDeleted')).to.equal(true);
        const live = await eventually(async () => {
          // The live projector has applied everything read above once its rows stop changing between two looks.
          const first = await snapshot(kind, kind === 'lists' ? CONTACT_LISTS_SCHEMA : CONTACTS_SCHEMA);
          await new Promise((r) => setTimeout(r, 300));
          const second = await snapshot(kind, kind === 'lists' ? CONTACT_LISTS_SCHEMA : CONTACTS_SCHEMA);
          return JSON.stringify(first) === JSON.stringify(second) ? second : null;
        });
        const apply = (schema: string, batch: RecordedEvent[]) => motor.rt.db.transaction((trx) => projection.applyBatch(trx, schema, batch));
        const s = scratch[kind];
        await migrateProjection(motor.rt.db, projection, s);
        await apply(s, events);
        expect(await snapshot(kind, s), 'from zero').to.deep.equal(live);
        await apply(s, events);
        await apply(s, events.slice(Math.floor(events.length / 3), Math.floor((2 * events.length) / 3)));
        expect(await snapshot(kind, s), 'twice, and in part again').to.deep.equal(live);
        const single = `${s}_single`;
        await migrateProjection(motor.rt.db, projection, single);
        for (const e of events) await apply(single, [e]);
        expect(await snapshot(kind, single), 'one at a time').to.deep.equal(live);
      });
    }

    after(async () => {
      for (const s of Object.values(scratch)) {
        await motor.rt.db.raw(`drop schema if exists "${s}" cascade`);
        await motor.rt.db.raw(`drop schema if exists "${s}_single" cascade`);
      }
    });
  });
});

/** The contenders' spellings of one name: case and spacing vary, the name is the same. */
function spelling(name: string, seed: string): string {
  const n = seed.charCodeAt(0) % 3;
  return n === 0 ? name : n === 1 ? name.toUpperCase() : ` ${name.toLowerCase()} `;
}
