import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { LIST_LIMITS } from '../../domain/comms/contactLists';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, tenant, type Tenant } from './support';

/**
 * Contact lists of the communications API (docs/COMMUNICATIONS.md "Lists"): the tenant rule on every
 * new route, create with read-your-writes, validation, unique names under concurrent creates, the
 * per-tenant cap and cursor pagination.
 */
describe('communications lists (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: Tenant;
  let b: Tenant;

  before(async () => {
    motor = await startTestMotor();
    a = await tenant(motor, 'lists-a@example.test');
    b = await tenant(motor, 'lists-b@example.test');
  });
  after(async () => { await motor?.close(); });

  const post = (body: unknown, who: Tenant = a) => commPost(motor, '/lists', body, as(who));
  const list = (who: Tenant, query = '') => commGet(motor, `/lists${query}`, as(who));

  it('every new route: 400 tenant_required without the header, 403 tenant_forbidden for another tenant, 401 without a JWT', async () => {
    const routes: Array<['GET' | 'POST', string]> = [['GET', '/lists'], ['POST', '/lists'], ['GET', '/suppressions'], ['GET', '/analytics/overview']];
    for (const [method, path] of routes) {
      const call = (headers: Record<string, string>) => (method === 'GET' ? commGet(motor, path, headers) : commPost(motor, path, { name: 'Tenant rule' }, headers));
      const none = await call(as(a, null));
      expect([none.status, none.body.code], `${method} ${path} without header`).to.deep.equal([400, 'tenant_required']);
      const other = await call(as(a, b.accountId));
      expect([other.status, other.body.code], `${method} ${path} other tenant`).to.deep.equal([403, 'tenant_forbidden']);
      const anonymous = await call({ 'x-tenant-id': a.accountId });
      expect(anonymous.status, `${method} ${path} without JWT`).to.equal(401);
      const forged = await call({ 'x-tenant-id': a.accountId, authorization: 'Bearer not.a.jwt' });
      expect(forged.status, `${method} ${path} bad JWT`).to.equal(401);
    }
    expect((await list(a)).body.data.items, 'the refused POSTs created nothing').to.deep.equal([]);
  });

  // GET /tracking/events is built: test/comms/tracking.int.test.ts; campaigns: test/comms/campaigns.e2e.test.ts.

  it('create: 201 with the stored list (name and description trimmed), visible to the next GET, newest first', async () => {
    const first = await post({ name: '  Customers  ', description: '  Everyone who bought  ' });
    expect(first.status, JSON.stringify(first.body)).to.equal(201);
    const l = first.body.data;
    expect(l).to.include({ name: 'Customers', description: 'Everyone who bought', contact_count: 0 });
    expect(l.id).to.match(/^[0-9a-f-]{36}$/);
    expect(l.created_at).to.equal(l.updated_at);
    const second = await post({ name: 'Beta testers' });
    expect(second.status).to.equal(201);
    expect(second.body.data.description).to.equal(null);
    const r = await list(a);
    expect(r.status).to.equal(200);
    expect(r.body.data.items.map((x: { name: string }) => x.name)).to.deep.equal(['Beta testers', 'Customers']);
    expect(r.body.data.items[1]).to.deep.equal(l);
    expect(r.body.data.next_cursor).to.equal(null);
    expect((await list(b)).body.data.items, 'another tenant sees none of them').to.deep.equal([]);
  });

  it('validation: 400 validation_error naming the field; nothing stored', async () => {
    const cases: Array<[unknown, string]> = [
      [{}, 'name'], [{ name: null }, 'name'], [{ name: '   ' }, 'name'], [{ name: 42 }, 'name'], [{ name: 'x'.repeat(LIST_LIMITS.nameMax + 1) }, 'name'],
      [{ name: 'two\nlines' }, 'name'], [{ name: 'ok', description: 7 }, 'description'], [{ name: 'ok', description: 'd'.repeat(LIST_LIMITS.descriptionMax + 1) }, 'description'],
    ];
    const before = (await list(a)).body.data.items.length;
    for (const [body, field] of cases) {
      const r = await post(body);
      expect([r.status, r.body.code, r.body.field], JSON.stringify(body)).to.deep.equal([400, 'validation_error', field]);
    }
    const array = await post([{ name: 'x' }]);
    expect([array.status, array.body.code], 'a JSON array is not a list').to.deep.equal([422, 'validation_error']);
    const extra = await post({ name: 'Extra', colour: 'red' });
    expect([extra.status, extra.body.code], 'unknown properties are refused by the OpenAPI validator').to.deep.equal([422, 'validation_error']);
    expect((await list(a)).body.data.items.length).to.equal(before);
    // The limits themselves are allowed (counted in characters, not bytes).
    expect((await post({ name: 'é'.repeat(LIST_LIMITS.nameMax), description: 'd'.repeat(LIST_LIMITS.descriptionMax) })).status).to.equal(201);
  });

  it('names are unique per tenant regardless of case and spacing (409 list_name_taken); another tenant may use the name', async () => {
    expect((await post({ name: 'Newsletter' })).status).to.equal(201);
    for (const name of ['newsletter', ' NEWSLETTER ', 'NewsLetter']) {
      const r = await post({ name });
      expect([r.status, r.body.code], name).to.deep.equal([409, 'list_name_taken']);
    }
    expect((await post({ name: 'Newsletter' }, b)).status).to.equal(201);
    expect((await post({ name: 'News letter' })).status, 'inner spacing is part of the name').to.equal(201);
  });

  it('concurrent creates of one name: exactly one 201, the others 409 list_name_taken; different names all succeed', async () => {
    const same = await Promise.all(['Launch', 'launch', 'LAUNCH', 'Launch ', 'lAuNcH', 'Launch', 'launch ', 'LAUNCH'].map((name) => post({ name })));
    expect(same.map((r) => r.status).sort()).to.deep.equal([201, 409, 409, 409, 409, 409, 409, 409]);
    expect(same.filter((r) => r.status === 409).every((r) => r.body.code === 'list_name_taken')).to.equal(true);
    const distinct = await Promise.all(Array.from({ length: 6 }, (_, i) => post({ name: `Parallel ${i}` })));
    expect(distinct.map((r) => r.status)).to.deep.equal([201, 201, 201, 201, 201, 201]);
    const names = (await list(a, '?limit=100')).body.data.items.map((x: { name: string }) => x.name.toLowerCase());
    expect(names.filter((n: string) => n.trim() === 'launch')).to.have.length(1);
    expect(names.filter((n: string) => n.startsWith('parallel '))).to.have.length(6);
  });

  it(`at most ${LIST_LIMITS.perTenant} lists per tenant: 409 list_limit_reached`, async () => {
    const c = await tenant(motor, 'lists-c@example.test');
    // 99 lists straight into the tenant's stream, as 99 creates would have appended them.
    const t0 = Date.now() - 3_600_000;
    const events: DomainEvent[] = Array.from({ length: LIST_LIMITS.perTenant - 1 }, (_, i) => ({
      type: 'ContactListCreated', data: { listId: newId(), tenantId: c.accountId, name: `Seeded ${i}`, description: null, createdAt: new Date(t0 + i * 1000).toISOString() },
    }));
    await motor.rt.store.append(streamName('contactLists', c.accountId), events.map((e) => toEventData(newId(), e, { actor: 'test' })), { expectedRevision: 'no_stream' });
    await eventually(async () => (await list(c, '?limit=100')).body.data.items.length === LIST_LIMITS.perTenant - 1);
    expect((await post({ name: 'Seeded 5' }, c)).body.code, 'a taken name is still told as such').to.equal('list_name_taken');
    expect((await post({ name: 'The hundredth' }, c)).status).to.equal(201);
    const over = await post({ name: 'One too many' }, c);
    expect([over.status, over.body.code, over.body.limit]).to.deep.equal([409, 'list_limit_reached', LIST_LIMITS.perTenant]);
    expect((await list(c, '?limit=100')).body.data.items).to.have.length(LIST_LIMITS.perTenant);
    expect((await post({ name: 'Other tenant is not capped' }, b)).status).to.equal(201);
  });

  it('pagination: limit and next_cursor walk every list once, newest first; bad limit or cursor is 400', async () => {
    const all = (await list(a, '?limit=100')).body.data.items.map((x: { id: string }) => x.id);
    expect(all.length).to.be.greaterThan(5);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await list(a, `?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(r.status).to.equal(200);
      expect(r.body.data.items.length).to.be.at.most(2);
      seen.push(...r.body.data.items.map((x: { id: string }) => x.id));
      cursor = r.body.data.next_cursor;
      pages++;
    } while (cursor !== null && pages < 50);
    expect(seen).to.deep.equal(all);
    const createdAt = (await list(a, '?limit=100')).body.data.items.map((x: { created_at: string }) => x.created_at);
    expect([...createdAt].sort().reverse()).to.deep.equal(createdAt);
    expect((await list(a)).body.data.items.length, 'default limit 50').to.equal(Math.min(50, all.length));
    for (const q of ['?limit=0', '?limit=101', '?limit=1.5', '?limit=abc']) {
      const r = await list(a, q);
      expect([r.status, r.body.code], q).to.deep.equal([400, 'invalid_query']);
    }
    for (const q of ['?cursor=nope', `?cursor=${Buffer.from('["2026-01-01","x"]').toString('base64url')}`]) {
      const r = await list(a, q);
      expect([r.status, r.body.code], q).to.deep.equal([400, 'invalid_cursor']);
    }
  });
});
