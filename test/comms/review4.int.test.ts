import { expect } from 'chai';
import { streamName } from '../../domain/eventStore';
import type { CampaignSendStarted } from '../../domain/events';
import { startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, commUrl, tenant, type Tenant } from './support';

/**
 * A fourth review of the communications API (templates, the tenant header, campaigns): each case
 * here failed before its fix.
 */
describe('communications review 4 (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: Tenant;

  before(async () => {
    motor = await startTestMotor({ roles: ['api', 'projector'] });
    a = await tenant(motor, 'review4-a@example.test');
  });
  after(async () => { await motor?.close(); });

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(commUrl(motor, path), {
      method, headers: { ...as(a), ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  };

  it('a template id in capitals: GET, PATCH and DELETE agree (PATCH and DELETE answered 404 template_not_found for a template GET showed)', async () => {
    const created = await commPost(motor, '/templates', { name: 'Caps', subject: 'S', type: 'text', body_text: 'T {{unsubscribe_url}}' }, as(a));
    expect(created.status).to.equal(201);
    const id = created.body.data.id as string;
    const upper = id.toUpperCase();
    expect((await commGet(motor, `/templates/${upper}`, as(a))).status, 'GET').to.equal(200);
    const patched = await call('PATCH', `/templates/${upper}`, { name: 'Caps 2' });
    expect([patched.status, patched.body.code ?? null], JSON.stringify(patched.body)).to.deep.equal([200, null]);
    expect(patched.body.data).to.include({ id, name: 'Caps 2' });
    const removed = await call('DELETE', `/templates/${upper}`);
    expect([removed.status, removed.body.code ?? null], JSON.stringify(removed.body)).to.deep.equal([200, null]);
    expect(removed.body.data).to.deep.equal({ id, deleted: true });
    expect((await commGet(motor, `/templates/${id}`, as(a))).status, 'gone').to.equal(404);
  });

  it('X-Tenant-Id naming the account in capitals is that account (answered 403 tenant_forbidden); another account is still 403', async () => {
    const r = await commGet(motor, '/lists', as(a, a.accountId.toUpperCase()));
    expect([r.status, r.body.code ?? null], JSON.stringify(r.body)).to.deep.equal([200, null]);
    const other = await commGet(motor, '/lists', as(a, '00000000-0000-4000-8000-000000000000'));
    expect([other.status, other.body.code]).to.deep.equal([403, 'tenant_forbidden']);
  });

  it('a text template sends no HTML part: its body_html (never checked: a text template\'s HTML is not validated) is not what a campaign records', async () => {
    const template = await commPost(motor, '/templates', {
      name: 'Plain with leftovers', subject: 'Plain', type: 'text', body_text: 'Hello {{name}} {{unsubscribe_url}}',
      body_html: '<p onclick="steal()">old <script>alert(1)</script><a href="javascript:alert(1)">x</a></p>',
    }, as(a));
    expect(template.status, JSON.stringify(template.body)).to.equal(201);
    const list = await commPost(motor, '/lists', { name: 'Plain' }, as(a));
    const domain = (await motor.rt.directory.domain(a.b.domainId))!.name;
    const campaign = await commPost(motor, '/campaigns', {
      name: 'Plain', template_id: template.body.data.id, list_id: list.body.data.id, motor_block_id: a.b.motorBlockId, from: `news@${domain}`,
    }, as(a));
    expect(campaign.status, JSON.stringify(campaign.body)).to.equal(201);
    const sent = await commPost(motor, `/campaigns/${campaign.body.data.id}/send`, {}, as(a));
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    const events = await motor.rt.store.readStream(streamName('campaign', campaign.body.data.id));
    const started = events.find((e) => e.type === 'CampaignSendStarted')!.data as CampaignSendStarted;
    expect(started.template).to.deep.equal({ subject: 'Plain', body_html: null, body_text: 'Hello {{name}} {{unsubscribe_url}}' });
  });
});
