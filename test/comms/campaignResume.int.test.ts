import { randomBytes, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { Worker } from 'bullmq';
import type { Knex } from 'knex';
import { toEventData } from '../../domain/events';
import type { EventStore } from '../../domain/eventStore';
import { createDb } from '../../infra/db';
import { createEventStore } from '../../infra/eventstore';
import { createLogger } from '../../infra/logger';
import { bullConnection } from '../../infra/redis';
import { campaignsProjection } from '../../projections/campaigns/projection';
import { campaignIdsUnderWay } from '../../projections/campaigns/queries';
import { ProjectionRunner, migrateProjection } from '../../projections/runner';
import { catchUpUntil } from '../../scripts/runtime';
import { CAMPAIGN_QUEUE, CampaignEnqueuer, campaignJobId, createCampaignQueue } from '../../workers/campaigns';
import { createTestDatabase, TEST_REDIS_URL } from '../support/db';
import { eventually } from '../support/motor';

/**
 * The enqueuer's sweep (CampaignEnqueuer.resume) over real PostgreSQL and Redis: the head page of
 * a campaign under way is queued when its job is missing, left alone while it exists, and retried
 * afresh when it failed every attempt (else the campaign would stay `sending` for good).
 */
describe('campaign enqueuer: the resume sweep (int)', () => {
  const prefix = `motor-campresume-${randomBytes(4).toString('hex')}`;
  const queue = createCampaignQueue(TEST_REDIS_URL, prefix);
  let drop: () => Promise<void>;
  let db: Knex;
  let store: EventStore;
  let enqueuer: CampaignEnqueuer;

  before(async () => {
    const t = await createTestDatabase('campresume');
    drop = t.drop;
    db = createDb(t.url);
    store = await createEventStore({ databaseUrl: t.url, eventstoreUrl: null });
    await migrateProjection(db, campaignsProjection);
    enqueuer = new CampaignEnqueuer({ db, store, queue, logger: createLogger('silent'), clock: { now: () => new Date() } });
  });
  after(async () => {
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    await store.close();
    await db.destroy();
    await drop();
  });

  /** A campaign whose sending has started (revision 1 is its head: the CampaignSendStarted). */
  async function sendingCampaign(): Promise<string> {
    const campaignId = randomUUID();
    const tenantId = randomUUID();
    const at = new Date().toISOString();
    await store.append(`campaign-${campaignId}`, [
      toEventData(randomUUID(), {
        type: 'CampaignCreated',
        data: {
          campaignId, tenantId, name: 'Resume me', templateId: randomUUID(), listId: randomUUID(), motorBlockId: randomUUID(),
          from: 'news@example.test', fromName: null, trackOpens: true, trackClicks: true, createdAt: at,
        },
      }),
      toEventData(randomUUID(), {
        type: 'CampaignSendStarted',
        data: { campaignId, tenantId, template: { subject: 'S', body_html: null, body_text: 'T' }, identityName: 'Acme', startedAt: at },
      }),
    ], { expectedRevision: 'no_stream' });
    await catchUpUntil(new ProjectionRunner(db, store, campaignsProjection), async () => (await campaignIdsUnderWay(db)).includes(campaignId));
    return campaignId;
  }

  it('a scheduled campaign whose due-start job was lost: the sweep queues it, delayed until it is due', async () => {
    const campaignId = randomUUID();
    const at = new Date();
    const scheduledAt = new Date(at.getTime() + 60 * 60_000).toISOString();
    await store.append(`campaign-${campaignId}`, [
      toEventData(randomUUID(), {
        type: 'CampaignCreated',
        data: {
          campaignId, tenantId: randomUUID(), name: 'Later', templateId: randomUUID(), listId: randomUUID(), motorBlockId: randomUUID(),
          from: 'news@example.test', fromName: null, trackOpens: true, trackClicks: true, createdAt: at.toISOString(),
        },
      }),
      toEventData(randomUUID(), { type: 'CampaignScheduled', data: { campaignId, tenantId: randomUUID(), scheduledAt, at: at.toISOString() } }),
    ], { expectedRevision: 'no_stream' });
    await catchUpUntil(new ProjectionRunner(db, store, campaignsProjection), async () => (await campaignIdsUnderWay(db)).includes(campaignId));
    expect(await queue.getJob(campaignJobId(campaignId, 1n))).to.equal(undefined);
    await enqueuer.resume();
    const job = (await queue.getJob(campaignJobId(campaignId, 1n)))!;
    expect(job.data).to.deep.equal({ campaignId, revision: '1' });
    expect(await job.getState()).to.equal('delayed');
    expect(job.delay).to.be.within(59 * 60_000, 60 * 60_000);
  });

  it('the sweep walks every campaign under way, page by page, and queues each head page', async () => {
    const ids = [await sendingCampaign(), await sendingCampaign(), await sendingCampaign()];
    const walked: string[] = [];
    for (let page = await campaignIdsUnderWay(db, null, 2); page.length > 0; page = await campaignIdsUnderWay(db, page[page.length - 1], 2)) walked.push(...page);
    expect(walked).to.include.members(ids);
    expect(new Set(walked).size).to.equal(walked.length);
    await enqueuer.resume();
    for (const id of ids) expect((await queue.getJob(campaignJobId(id, 1n)))?.data, id).to.deep.equal({ campaignId: id, revision: '1' });
  });

  it('queues a missing head page once; a page that failed every attempt is retried from its first attempt', async () => {
    const campaignId = await sendingCampaign();
    const jobId = campaignJobId(campaignId, 1n);
    await enqueuer.resume();
    const job = await queue.getJob(jobId);
    expect(job?.data).to.deep.equal({ campaignId, revision: '1' });
    const before = await queue.getJobCountByTypes('waiting', 'delayed', 'active', 'failed');
    await enqueuer.resume();
    expect(await queue.getJobCountByTypes('waiting', 'delayed', 'active', 'failed'), 'nothing added twice').to.equal(before);

    // Every attempt throws (an outage longer than the backoff): the job ends failed.
    const failing = new Worker(CAMPAIGN_QUEUE, async () => { throw new Error('database down'); }, { connection: bullConnection(TEST_REDIS_URL), prefix, autorun: false });
    try {
      // One attempt is enough to reach the failed state in the test: the queue's backoff would take 34 minutes.
      await queue.getJob(jobId).then((j) => j!.remove());
      await queue.add('campaign-page', { campaignId, revision: '1' }, { jobId, attempts: 1 });
      void failing.run();
      await eventually(async () => ((await queue.getJob(jobId))?.failedReason === 'database down' ? true : undefined), 10_000, 50);
    } finally {
      await failing.close();
    }
    expect(await (await queue.getJob(jobId))!.isFailed()).to.equal(true);

    await enqueuer.resume();
    const retried = (await queue.getJob(jobId))!;
    expect(await retried.getState()).to.equal('waiting');
    expect(retried.attemptsMade).to.equal(0);
    expect(retried.data).to.deep.equal({ campaignId, revision: '1' });
  });
});
