import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { newId } from '../../domain/ids';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, commUrl, tenant, type Tenant } from './support';

/**
 * Bugs found in the review of the communications features (each test failed before its fix):
 * a uuid in capitals names the same record on every route (GET found it, the writes answered 404;
 * a list id in capitals was 404 on every contact route).
 */
describe('communications review (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: Tenant;
  let listA: string;

  before(async () => {
    motor = await startTestMotor();
    a = await tenant(motor, 'review-a@example.test');
    const r = await commPost(motor, '/lists', { name: 'Review' }, as(a));
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
    listA = r.body.data.id;
  });
  after(async () => { await motor?.close(); });

  const del = async (path: string) => {
    const res = await fetch(commUrl(motor, path), { method: 'DELETE', headers: as(a) });
    return { status: res.status, body: await res.json() as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  };

  it('a contact id in capitals: GET and DELETE agree (DELETE answered 404 contact_not_found for a contact GET showed)', async () => {
    const added = await commPost(motor, `/lists/${listA}/contacts`, { email: 'caps@example.com' }, as(a));
    expect(added.status).to.equal(201);
    const upper = (added.body.data.id as string).toUpperCase();
    const got = await commGet(motor, `/lists/${listA}/contacts/${upper}`, as(a));
    expect(got.status, 'GET with capitals').to.equal(200);
    const removed = await del(`/lists/${listA}/contacts/${upper}`);
    expect([removed.status, removed.body.code ?? null], JSON.stringify(removed.body)).to.deep.equal([200, null]);
    expect(removed.body.data).to.deep.equal({ id: added.body.data.id, deleted: true });
    expect((await commGet(motor, `/lists/${listA}/contacts/${added.body.data.id}`, as(a))).status, 'gone').to.equal(404);
  });

  it('a list id in capitals is the same list on every contact route (all answered 404 list_not_found), and its contacts are the same contacts', async () => {
    const upper = listA.toUpperCase();
    const added = await commPost(motor, `/lists/${upper}/contacts`, { email: 'list-caps@example.com', name: 'Caps' }, as(a));
    expect([added.status, added.body.code ?? null], JSON.stringify(added.body)).to.deep.equal([201, null]);
    expect(added.body.data.list_id, 'stored under the list\'s own id').to.equal(listA);
    const lower = await commPost(motor, `/lists/${listA}/contacts`, { email: 'list-caps@example.com' }, as(a));
    expect([lower.status, lower.body.code], 'one contact per address, whatever the case of the list id').to.deep.equal([409, 'contact_exists']);
    const id = added.body.data.id as string;
    expect((await commGet(motor, `/lists/${upper}/contacts/${id}`, as(a))).body.data).to.deep.equal(added.body.data);
    expect((await commGet(motor, `/lists/${upper}/contacts?email=list-caps@example.com`, as(a))).body.data.items.map((c: { id: string }) => c.id)).to.deep.equal([id]);
    const batch = await commPost(motor, `/lists/${upper}/contacts/batch`, { contacts: [{ email: 'list-caps@example.com' }] }, as(a));
    expect(batch.body.data.items[0]).to.include({ status: 'exists', contact_id: id });
    const res = await fetch(commUrl(motor, `/lists/${upper}/contacts/${id}`), { method: 'PATCH', headers: { ...as(a), 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Upper' }) });
    expect(res.status).to.equal(200);
    expect(((await res.json()) as { data: { name: string } }).data.name).to.equal('Upper');
    expect((await del(`/lists/${upper}/contacts/${id}`)).status).to.equal(200);
    expect((await commGet(motor, `/lists/${listA}/contacts/${id}`, as(a))).status, 'gone').to.equal(404);
  });

  it('a campaign id in capitals: GET and cancel agree (cancel answered 404 campaign_not_found for a campaign GET showed)', async () => {
    const campaignId = newId();
    const at = new Date().toISOString();
    await motor.rt.store.append(streamName('campaign', campaignId), [toEventData(newId(), {
      type: 'CampaignCreated',
      data: {
        campaignId, tenantId: a.accountId, name: 'Caps', templateId: newId(), listId: listA, motorBlockId: a.b.motorBlockId,
        from: 'news@example.test', fromName: null, trackOpens: true, trackClicks: true, createdAt: at,
      },
    })], { expectedRevision: 'no_stream' });
    const upper = campaignId.toUpperCase();
    await eventually(async () => (await commGet(motor, `/campaigns/${upper}`, as(a))).status === 200);
    const cancelled = await commPost(motor, `/campaigns/${upper}/cancel`, {}, as(a));
    expect([cancelled.status, cancelled.body.code ?? null], JSON.stringify(cancelled.body)).to.deep.equal([200, null]);
    expect(cancelled.body.data).to.include({ id: campaignId, status: 'cancelled' });
  });
});
