import type { ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import { streamName, type RecordedEvent } from '../../domain/eventStore';
import { toEventData } from '../../domain/events';
import { newId } from '../../domain/ids';
import { campaignsProjection, CAMPAIGNS_SCHEMA } from '../../projections/campaigns/projection';
import { getBlock } from '../../projections/directory/queries';
import { migrateProjection } from '../../projections/runner';
import { campaignJobId, createCampaignQueue } from '../../workers/campaigns';
import { TEST_REDIS_URL } from '../support/db';
import { startDnsServer, type TestDnsServer } from '../support/dnsServer';
import { startSmtpSink, type SmtpSink } from '../support/smtpSink';
import { startWorkerProcess } from '../support/workerProcess';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, commPost, commUrl, tenant, type Tenant, extraBlock } from './support';

/**
 * Scheduling, editing and deleting campaigns (docs/COMMUNICATIONS.md "Campaigns") end to end: a
 * scheduled send starts when due and reaches every contact once; a cancelled one never starts; a
 * due start whose template is gone ends the campaign; the edit and delete routes with their checks
 * and codes; the read model rebuilt from the log equals the live one. Last, crash safety: a worker
 * role that only starts after the due time still starts the campaign.
 */

type Json = { status: number; body: any }; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(motor: TestMotor, method: 'PATCH' | 'DELETE' | 'POST', path: string, headers: Record<string, string>, body?: unknown): Promise<Json> {
  const res = await fetch(commUrl(motor, path), {
    method, headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: res.status, body: json };
}

const acceptedOf = async (motor: TestMotor, campaignId: string): Promise<number> =>
  (await motor.rt.db.raw(`select count(*)::int as n from events where type = 'MessageAccepted' and data->'metadata'->>'campaign_id' = ?`, [campaignId])).rows[0].n as number;

const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString();

describe('communications campaigns: schedule, edit, delete (e2e)', function () {
  this.timeout(180_000);
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let a: Tenant;
  let b: Tenant;
  let domainA: string;
  let templateA: string;
  let listA: string;
  let listB: string;
  let templateB: string;
  const rcpts = ['s1@rcpt.test', 's2@rcpt.test', 's3@rcpt.test'];

  const post = (path: string, body: unknown, who: Tenant = a) => commPost(motor, path, body, as(who));
  const get = (path: string, who: Tenant = a) => commGet(motor, path, as(who));
  const patch = (path: string, body: unknown, who: Tenant = a) => call(motor, 'PATCH', path, as(who), body);
  const del = (path: string, who: Tenant = a) => call(motor, 'DELETE', path, as(who));

  async function makeList(name: string, emails: string[], who: Tenant = a): Promise<string> {
    const r = await post('/lists', { name }, who);
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
    for (const email of emails) {
      const c = await post(`/lists/${r.body.data.id}/contacts`, { email }, who);
      if (c.status !== 201) throw new Error(JSON.stringify(c.body));
    }
    return r.body.data.id as string;
  }

  async function makeTemplate(who: Tenant = a, name = 'Sched'): Promise<string> {
    const r = await post('/templates', { name, subject: 'Scheduled {{name}}', type: 'text', body_text: 'Hello {{unsubscribe_url}}' }, who);
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
    return r.body.data.id as string;
  }


  async function createCampaign(over: Record<string, unknown> = {}, who: Tenant = a): Promise<{ id: string }> {
    const r = await post('/campaigns', { name: 'Later', template_id: templateA, list_id: listA, motor_block_id: a.b.motorBlockId, from: `news@${domainA}`, ...over }, who);
    if (r.status !== 201) throw new Error(`create campaign: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.data;
  }

  const statusOf = async (id: string, status: string, timeoutMs = 30_000) => eventually(async () => {
    const r = await get(`/campaigns/${id}`);
    return r.body.data?.status === status ? r.body.data : null;
  }, timeoutMs, 100);

  /** The due-start job of a campaign scheduled at revision 1 (its CampaignScheduled), once the worker has run it. */
  async function dueJobRan(campaignId: string, revision = 1n): Promise<unknown> {
    const queue = createCampaignQueue(process.env.TEST_REDIS_URL ?? TEST_REDIS_URL, motor.rt.queuePrefix);
    try {
      return await eventually(async () => {
        // State first, then the job: a job read before it completed holds no return value (null),
        // even when isCompleted() asked a moment later says it has.
        const jobId = campaignJobId(campaignId, revision);
        if ((await queue.getJobState(jobId)) !== 'completed') return null;
        const job = await queue.getJob(jobId);
        return job ? { result: job.returnvalue as unknown } : null;
      }, 30_000, 100);
    } finally {
      await queue.close();
    }
  }

  before(async () => {
    dns = await startDnsServer({ 'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] }, 'mx.rcpt.test': { A: ['127.0.0.1'] } });
    mx = await startSmtpSink({ starttls: false });
    motor = await startTestMotor({ env: { DNS_SERVERS: dns.address, MX_PORT: String(mx.port), CAMPAIGN_PAGE_SIZE: '2', AUTH_PUBLIC_URL: 'https://auth.motor.test' } });
    a = await tenant(motor, 'campaign-sched-a@example.test');
    b = await tenant(motor, 'campaign-sched-b@example.test');
    domainA = (await motor.rt.directory.domain(a.b.domainId))!.name;
    templateA = await makeTemplate();
    listA = await makeList('Scheduled', rcpts);
    listB = await makeList('B', [], b);
    templateB = await makeTemplate(b);
  });
  after(async () => {
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  describe('scheduling', () => {
    it('scheduled a few seconds ahead: 202 scheduled, listed by status, locked; then sent when due, one message per contact', async () => {
      const c = await createCampaign();
      const at = inSeconds(3);
      const r = await post(`/campaigns/${c.id}/send`, { scheduled_at: at });
      expect(r.status).to.equal(202);
      expect(r.body.data).to.include({ status: 'scheduled', scheduled_at: at, started_at: null, cancel_reason: null });
      expect((await get(`/campaigns/${c.id}`)).body.data.status).to.equal('scheduled');
      expect((await get('/campaigns?status=scheduled')).body.data.items.map((x: { id: string }) => x.id)).to.deep.equal([c.id]);
      // A scheduled campaign is not a draft: no edit; and not deletable.
      const edit = await patch(`/campaigns/${c.id}`, { name: 'x' });
      expect([edit.status, edit.body.code, edit.body.details?.status ?? edit.body.status]).to.deep.equal([409, 'campaign_not_draft', 'scheduled']);
      const gone = await del(`/campaigns/${c.id}`);
      expect([gone.status, gone.body.code]).to.deep.equal([409, 'campaign_not_deletable']);
      expect(await acceptedOf(motor, c.id), 'nothing before it is due').to.equal(0);

      const sent = await statusOf(c.id, 'sent');
      expect(Date.parse(sent.started_at)).to.be.at.least(Date.parse(at));
      expect(sent.scheduled_at).to.equal(at);
      expect(sent.counts).to.deep.equal({ recipients: 3, accepted: 3, skipped_suppressed: 0, failed: 0 });
      expect(await acceptedOf(motor, c.id)).to.equal(3);
      await eventually(async () => rcpts.every((addr) => mx.messages.filter((m) => m.envelope.rcptTo.includes(addr)).length === 1), 30_000, 100);
      // The stream: created, scheduled, then the start appended by the sender, with the template's content of then.
      const types = (await motor.rt.store.readStream(streamName('campaign', c.id))).map((e) => e.type);
      expect(types.slice(0, 3)).to.deep.equal(['CampaignCreated', 'CampaignScheduled', 'CampaignSendStarted']);
      expect(types[types.length - 1]).to.equal('CampaignSendCompleted');
    });

    it('moved to a later time: nothing at the first time (its job finds the stream moved on), sent once at the second', async () => {
      const c = await createCampaign({ name: 'Moved' });
      expect((await post(`/campaigns/${c.id}/send`, { scheduled_at: inSeconds(2) })).status).to.equal(202);
      const at = inSeconds(5);
      const moved = await post(`/campaigns/${c.id}/send`, { scheduled_at: at });
      expect([moved.status, moved.body.data.status, moved.body.data.scheduled_at]).to.deep.equal([202, 'scheduled', at]);
      expect(await dueJobRan(c.id), 'the first due start').to.deep.equal({ result: 'stale' });
      expect(await acceptedOf(motor, c.id), 'nothing at the first time').to.equal(0);
      const sent = await statusOf(c.id, 'sent');
      expect(Date.parse(sent.started_at)).to.be.at.least(Date.parse(at));
      expect(sent.counts.accepted).to.equal(3);
      expect(await acceptedOf(motor, c.id)).to.equal(3);
      const types = (await motor.rt.store.readStream(streamName('campaign', c.id))).map((e) => e.type);
      expect(types.slice(0, 4)).to.deep.equal(['CampaignCreated', 'CampaignScheduled', 'CampaignScheduled', 'CampaignSendStarted']);
    });

    it('a scheduled campaign sent now starts at once; its due start later finds it started and sends nothing twice', async () => {
      const c = await createCampaign({ name: 'Brought forward' });
      expect((await post(`/campaigns/${c.id}/send`, { scheduled_at: inSeconds(3) })).status).to.equal(202);
      const now = await post(`/campaigns/${c.id}/send`, {});
      expect(now.status).to.equal(202);
      expect(['sending', 'sent']).to.include(now.body.data.status);
      await statusOf(c.id, 'sent');
      expect(await dueJobRan(c.id), 'the due start').to.deep.equal({ result: 'stale' });
      expect(await acceptedOf(motor, c.id)).to.equal(3);
      const again = await post(`/campaigns/${c.id}/send`, { scheduled_at: inSeconds(60) });
      expect([again.status, again.body.code]).to.deep.equal([409, 'campaign_not_draft']);
    });

    it('a cancelled scheduled campaign never starts (its due job finds it cancelled)', async () => {
      const c = await createCampaign({ name: 'Never' });
      expect((await post(`/campaigns/${c.id}/send`, { scheduled_at: inSeconds(2) })).status).to.equal(202);
      const r = await post(`/campaigns/${c.id}/cancel`, {});
      expect(r.status).to.equal(200);
      expect(r.body.data).to.include({ status: 'cancelled', cancel_reason: null });
      expect(r.body.data.completed_at).to.be.a('string');
      expect(await dueJobRan(c.id)).to.deep.equal({ result: 'stale' });
      const types = (await motor.rt.store.readStream(streamName('campaign', c.id))).map((e) => e.type);
      expect(types).to.deep.equal(['CampaignCreated', 'CampaignScheduled', 'CampaignCancelled']);
      expect(await acceptedOf(motor, c.id)).to.equal(0);
      expect((await get(`/campaigns/${c.id}`)).body.data.status).to.equal('cancelled');
    });

    it('a due start whose template was deleted meanwhile ends the campaign, unsent, with the reason (decision)', async () => {
      const tpl = await makeTemplate(a, 'Doomed');
      const c = await createCampaign({ name: 'Orphan', template_id: tpl });
      expect((await post(`/campaigns/${c.id}/send`, { scheduled_at: inSeconds(2) })).status).to.equal(202);
      expect((await del(`/templates/${tpl}`)).status).to.equal(200);
      const ended = await statusOf(c.id, 'cancelled');
      expect(ended.cancel_reason).to.equal('template_not_found');
      expect(ended.started_at).to.equal(null);
      expect(ended.completed_at).to.be.a('string');
      expect(await acceptedOf(motor, c.id)).to.equal(0);
    });

    it('scheduled_at: past, now, over 90 days, not a time, no offset are 400 on the field; an unknown property 422; no body sends now', async () => {
      const c = await createCampaign({ name: 'Bad times', list_id: await makeList('Empty', []) });
      const cases: unknown[] = [
        new Date(Date.now() - 60_000).toISOString(), new Date(Date.now() + 91 * 86_400_000).toISOString(), 'next tuesday', '2030-01-01T10:00:00',
        '2030-02-30T10:00:00Z', 1_900_000_000_000, true,
      ];
      for (const v of cases) {
        const r = await post(`/campaigns/${c.id}/send`, { scheduled_at: v });
        expect(r.status, String(v)).to.equal(400);
        expect(r.body, String(v)).to.deep.include({ code: 'validation_error' });
        expect(r.body.details?.field ?? r.body.field, String(v)).to.equal('scheduled_at');
      }
      expect((await post(`/campaigns/${c.id}/send`, { scheduled_at: inSeconds(60), later: true })).status).to.equal(422);
      expect((await get(`/campaigns/${c.id}`)).body.data.status).to.equal('draft');
      // 89 days ahead is fine; cancel it, then a fresh draft sent with no body at all starts now.
      expect((await post(`/campaigns/${c.id}/send`, { scheduled_at: new Date(Date.now() + 89 * 86_400_000).toISOString() })).body.data.status).to.equal('scheduled');
      expect((await post(`/campaigns/${c.id}/cancel`, {})).status).to.equal(200);
      const now = await createCampaign({ name: 'No body', list_id: await makeList('Empty 2', []) });
      const r = await call(motor, 'POST', `/campaigns/${now.id}/send`, as(a));
      expect(r.status).to.equal(202);
      // Started at once: its list is empty, so the sender may have completed it before the answer's read.
      expect(['sending', 'sent'], r.body.data.status).to.include(r.body.data.status);
      expect(r.body.data.scheduled_at).to.equal(null);
      expect(r.body.data.started_at).to.be.a('string');
    });

    it('the checks of a send run when scheduling: 404 template, 403 inactive block; another tenant 404; an id in capitals is the campaign', async () => {
      const tpl = await makeTemplate(a, 'Soon gone');
      const c = await createCampaign({ name: 'Checks', template_id: tpl });
      expect((await del(`/templates/${tpl}`)).status).to.equal(200);
      expect((await post(`/campaigns/${c.id}/send`, { scheduled_at: inSeconds(60) })).body.code).to.equal('template_not_found');
      expect((await post(`/campaigns/${c.id}/send`, { scheduled_at: inSeconds(60) }, b)).body.code).to.equal('campaign_not_found');
      const block = await extraBlock(motor, a, 'marketing');
      const onBlock = await createCampaign({ name: 'Block off', motor_block_id: block });
      await motor.rt.store.append(streamName('motorBlock', block), [toEventData(newId(), { type: 'MotorBlockDeactivated', data: { motorBlockId: block, at: new Date().toISOString() } })], { expectedRevision: 'any' });
      await eventually(async () => (await getBlock(motor.rt.db, block))?.status === 'inactive');
      const off = await post(`/campaigns/${onBlock.id}/send`, { scheduled_at: inSeconds(60) });
      expect([off.status, off.body.code]).to.deep.equal([403, 'motor_block_inactive']);
      expect((await get(`/campaigns/${onBlock.id}`)).body.data.status).to.equal('draft');
      const d = await createCampaign({ name: 'Caps' });
      const r = await post(`/campaigns/${d.id.toUpperCase()}/send`, { scheduled_at: inSeconds(600) });
      expect(r.status).to.equal(202);
      expect(r.body.data).to.include({ id: d.id, status: 'scheduled' });
      expect((await post(`/campaigns/${d.id.toUpperCase()}/cancel`, {})).body.data.status).to.equal('cancelled');
    });
  });

  describe('editing a draft', () => {
    it('each field, with the create checks for the fields given; 409 when not a draft', async () => {
      const c = await createCampaign({ name: 'Edit me', from_name: 'Old' });
      const list2 = await makeList('Edit list', []);
      const tpl2 = await makeTemplate(a, 'Edit tpl');
      const marketing = await extraBlock(motor, a, 'marketing');
      const r = await patch(`/campaigns/${c.id.toUpperCase()}`, {
        name: ' Edited ', template_id: tpl2, list_id: list2, motor_block_id: marketing, from: `edited@${domainA}`, from_name: null, track_opens: false, track_clicks: false,
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.data).to.include({
        id: c.id, name: 'Edited', status: 'draft', template_id: tpl2, list_id: list2, motor_block_id: marketing, from: `edited@${domainA}`, from_name: null,
        track_opens: false, track_clicks: false,
      });
      expect((await get(`/campaigns/${c.id}`)).body.data).to.deep.equal(r.body.data);
      expect((await patch(`/campaigns/${c.id}`, { from_name: 'New name' })).body.data).to.include({ from_name: 'New name', name: 'Edited' });

      const other = newId();
      const cases: Array<[Record<string, unknown>, number, string, string?]> = [
        [{ name: '' }, 400, 'validation_error', 'name'],
        [{ name: null }, 400, 'validation_error', 'name'],
        [{ template_id: 'nope' }, 400, 'validation_error', 'template_id'],
        [{ from: 'A <a@x.test>' }, 400, 'validation_error', 'from'],
        [{ from_name: 'a\nb' }, 400, 'validation_error', 'from_name'],
        [{ track_clicks: 'yes' }, 400, 'validation_error', 'track_clicks'],
        [{}, 400, 'validation_error'],
        [{ template_id: other }, 404, 'template_not_found'],
        [{ template_id: templateB }, 404, 'template_not_found'],
        [{ list_id: listB }, 404, 'list_not_found'],
        [{ motor_block_id: b.b.motorBlockId }, 404, 'motor_block_not_found'],
        [{ motor_block_id: await extraBlock(motor, a, 'transactional') }, 409, 'campaign_block_type_not_allowed'],
        [{ motor_block_id: await extraBlock(motor, a, 'marketing', false) }, 403, 'motor_block_inactive'],
        [{ from: 'news@elsewhere.test' }, 403, 'from_domain_mismatch'],
      ];
      const before = (await get(`/campaigns/${c.id}`)).body.data;
      for (const [body, status, code, field] of cases) {
        const x = await patch(`/campaigns/${c.id}`, body);
        expect(x.status, JSON.stringify(body)).to.equal(status);
        expect(x.body.code, JSON.stringify(body)).to.equal(code);
        if (field) expect(x.body.details?.field ?? x.body.field, JSON.stringify(body)).to.equal(field);
      }
      expect((await patch(`/campaigns/${c.id}`, { name: 'x', status: 'sent' })).status).to.equal(422);
      expect((await get(`/campaigns/${c.id}`)).body.data, 'a refused edit changes nothing').to.deep.equal(before);
      expect((await patch(`/campaigns/${c.id}`, { name: 'x' }, b)).body.code).to.equal('campaign_not_found');
      expect((await patch(`/campaigns/${newId()}`, { name: 'x' })).body.code).to.equal('campaign_not_found');
      expect((await patch('/campaigns/not-a-uuid', { name: 'x' })).body.code).to.equal('invalid_id');

      expect((await post(`/campaigns/${c.id}/cancel`, {})).status).to.equal(200);
      const late = await patch(`/campaigns/${c.id}`, { name: 'Too late' });
      expect(late.status).to.equal(409);
      expect(late.body.code).to.equal('campaign_not_draft');
      expect(late.body.details?.status ?? late.body.status).to.equal('cancelled');
    });

    it('a sent campaign sends what its draft was edited to', async () => {
      const c = await createCampaign({ name: 'Retargeted', list_id: await makeList('Old target', []) });
      const target = await makeList('New target', ['edited1@rcpt.test']);
      expect((await patch(`/campaigns/${c.id}`, { list_id: target })).status).to.equal(200);
      expect((await post(`/campaigns/${c.id}/send`, {})).status).to.equal(202);
      expect((await statusOf(c.id, 'sent')).counts.accepted).to.equal(1);
      await eventually(async () => mx.messages.some((m) => m.envelope.rcptTo.includes('edited1@rcpt.test')), 30_000, 100);
    });
  });

  describe('deleting', () => {
    it('a draft: 200, then 404 on every route and gone from the list; another tenant 404', async () => {
      const c = await createCampaign({ name: 'Delete me' });
      expect((await del(`/campaigns/${c.id}`, b)).body.code).to.equal('campaign_not_found');
      const r = await del(`/campaigns/${c.id.toUpperCase()}`);
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ success: true, data: { id: c.id, deleted: true } });
      for (const x of [
        await get(`/campaigns/${c.id}`), await patch(`/campaigns/${c.id}`, { name: 'x' }), await post(`/campaigns/${c.id}/send`, {}),
        await post(`/campaigns/${c.id}/send`, { scheduled_at: inSeconds(60) }), await post(`/campaigns/${c.id}/cancel`, {}), await del(`/campaigns/${c.id}`),
      ]) {
        expect(x.status).to.equal(404);
        expect(x.body.code).to.equal('campaign_not_found');
      }
      expect((await get('/campaigns?limit=100')).body.data.items.map((x: { id: string }) => x.id)).not.to.include(c.id);
      expect((await get('/campaigns?status=draft&limit=100')).body.data.items.map((x: { id: string }) => x.id)).not.to.include(c.id);
    });

    it('a sent campaign: deleted, its messages stay', async () => {
      const c = await createCampaign({ name: 'Sent then deleted', list_id: await makeList('Deleted list', ['del1@rcpt.test']) });
      expect((await post(`/campaigns/${c.id}/send`, {})).status).to.equal(202);
      await statusOf(c.id, 'sent');
      expect((await del(`/campaigns/${c.id}`)).status).to.equal(200);
      expect((await get(`/campaigns/${c.id}`)).status).to.equal(404);
      expect(await acceptedOf(motor, c.id)).to.equal(1);
    });

    it('a sending campaign (paused on an inactive block): 409 campaign_not_deletable until cancelled', async () => {
      const inactive = await extraBlock(motor, a, 'marketing', false);
      const list = await makeList('Stuck', ['stuck@rcpt.test']);
      const campaignId = newId();
      const at = new Date().toISOString();
      // Straight into the log: the routes refuse an inactive block, and the sender pauses on one (5 minutes), so it stays `sending`.
      await motor.rt.store.append(streamName('campaign', campaignId), [
        toEventData(newId(), {
          type: 'CampaignCreated',
          data: { campaignId, tenantId: a.accountId, name: 'Stuck', templateId: templateA, listId: list, motorBlockId: inactive, from: `news@${domainA}`, fromName: null, trackOpens: false, trackClicks: false, createdAt: at },
        }),
        toEventData(newId(), { type: 'CampaignSendStarted', data: { campaignId, tenantId: a.accountId, template: { subject: 'S', body_html: null, body_text: 'T' }, identityName: 'X', startedAt: at } }),
      ], { expectedRevision: 'no_stream' });
      await eventually(async () => (await get(`/campaigns/${campaignId}`)).body.data?.paused_until, 30_000, 100);
      const r = await del(`/campaigns/${campaignId}`);
      expect(r.status).to.equal(409);
      expect(r.body.code).to.equal('campaign_not_deletable');
      expect(r.body.details?.status ?? r.body.status).to.equal('sending');
      expect((await post(`/campaigns/${campaignId}/cancel`, {})).status).to.equal(200);
      expect((await del(`/campaigns/${campaignId}`)).status).to.equal(200);
    });
  });

  // Last (mocha runs a describe's own tests before its nested ones): the log then holds every new event.
  describe('read model', () => {
    it('the read model: applied again from zero, twice, or one event at a time, gives the live rows', async () => {
      const events: RecordedEvent[] = [];
      let after: string | null = null;
      for (;;) {
        const batch = await motor.rt.store.readAll({ after, maxCount: 1000 });
        if (batch.length === 0) break;
        events.push(...batch.filter((e) => e.type.startsWith('Campaign')));
        after = batch[batch.length - 1].position;
      }
      for (const t of ['CampaignScheduled', 'CampaignUpdated', 'CampaignDeleted', 'CampaignScheduledStartFailed']) expect(events.map((e) => e.type), t).to.include(t);
      const snapshot = async (schema: string) => (await motor.rt.db.raw(`select * from "${schema}"."campaigns" order by id`)).rows;
      // The live projector may still be applying the last checkpoints: compare once it has caught up with the log.
      const live = await eventually(async () => {
        const rows = await snapshot(CAMPAIGNS_SCHEMA);
        const heads = new Map<string, string>();
        for (const e of events) heads.set(e.streamId, e.revision.toString());
        return rows.every((r: { id: string; revision: string }) => heads.get(`campaign-${r.id}`) === String(r.revision)) ? rows : null;
      }, 10_000, 100);
      expect(live.some((r: { deleted_at: Date | null }) => r.deleted_at !== null)).to.equal(true);
      expect(live.some((r: { cancel_reason: string | null }) => r.cancel_reason === 'template_not_found')).to.equal(true);
      const apply = (schema: string, batch: RecordedEvent[]) => motor.rt.db.transaction((trx) => campaignsProjection.applyBatch(trx, schema, batch));
      const scratch = 'rm_campaigns_schedreplay';
      await migrateProjection(motor.rt.db, campaignsProjection, scratch);
      await apply(scratch, events);
      expect(await snapshot(scratch)).to.deep.equal(live);
      await apply(scratch, events);
      expect(await snapshot(scratch), 're-delivered').to.deep.equal(live);
      const single = `${scratch}_single`;
      await migrateProjection(motor.rt.db, campaignsProjection, single);
      for (const e of events) await apply(single, [e]);
      expect(await snapshot(single)).to.deep.equal(live);
    });
  });
});

describe('a scheduled campaign whose worker role starts only after the due time still starts (e2e)', function () {
  this.timeout(180_000);
  let dns: TestDnsServer;
  let mx: SmtpSink;
  let motor: TestMotor;
  let env: Record<string, string>;
  let worker: ChildProcess | null = null;

  before(async () => {
    dns = await startDnsServer({ 'rcpt.test': { MX: [{ exchange: 'mx.rcpt.test', priority: 10 }] }, 'mx.rcpt.test': { A: ['127.0.0.1'] } });
    mx = await startSmtpSink({ starttls: false });
    env = { LOG_LEVEL: 'silent', TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123', DNS_SERVERS: dns.address, MX_PORT: String(mx.port), MX_ALLOW_PRIVATE_ADDRESSES: 'true', CAMPAIGN_PAGE_SIZE: '2' };
    // No worker role here: nothing can queue or run the due start until the worker process below.
    motor = await startTestMotor({ roles: ['api', 'projector'], env });
  });
  after(async () => {
    if (worker && worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
    await motor?.close();
    await mx?.close();
    await dns?.close();
  });

  it('scheduled, due while no worker runs; the worker started afterwards starts and sends it once per contact', async () => {
    const a = await tenant(motor, 'campaign-sched-crash@example.test');
    const h = as(a);
    const tpl = await commPost(motor, '/templates', { name: 'T', subject: 'Hi', type: 'text', body_text: 'Hello {{unsubscribe_url}}' }, h);
    const list = await commPost(motor, '/lists', { name: 'Late' }, h);
    const listId = list.body.data.id as string;
    for (let i = 0; i < 5; i++) expect((await commPost(motor, `/lists/${listId}/contacts`, { email: `late${i}@rcpt.test` }, h)).status).to.equal(201);
    const domain = (await motor.rt.directory.domain(a.b.domainId))!.name;
    const created = await commPost(motor, '/campaigns', { name: 'Late', template_id: tpl.body.data.id, list_id: listId, motor_block_id: a.b.motorBlockId, from: `news@${domain}` }, h);
    const id = created.body.data.id as string;
    const due = inSeconds(1);
    expect((await commPost(motor, `/campaigns/${id}/send`, { scheduled_at: due }, h)).body.data.status).to.equal('scheduled');
    await eventually(async () => Date.now() > Date.parse(due) + 500, 10_000, 100);
    expect((await commGet(motor, `/campaigns/${id}`, h)).body.data.status, 'nothing starts it without a worker').to.equal('scheduled');

    worker = await startWorkerProcess(motor, env);
    const done = await eventually(async () => {
      const r = await commGet(motor, `/campaigns/${id}`, h);
      return r.body.data.status === 'sent' ? r.body.data : null;
    }, 60_000, 200);
    expect(done.counts).to.deep.equal({ recipients: 5, accepted: 5, skipped_suppressed: 0, failed: 0 });
    expect(await acceptedOf(motor, id)).to.equal(5);
    await eventually(async () => new Set(mx.messages.flatMap((m) => m.envelope.rcptTo)).size === 5, 60_000, 200);
  });
});
