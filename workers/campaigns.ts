import type { Knex } from 'knex';
import { Queue, Worker, type Job } from 'bullmq';
import { streamName, WrongExpectedRevisionError, type EventStore, type RecordedEvent } from '../domain/eventStore';
import { isDomainError } from '../domain/errors';
import { toEventData, type CampaignCounts, type CampaignProgressed, type CampaignScheduled, type CampaignSendStarted, type DomainEvent } from '../domain/events';
import { uuidV5, type Clock } from '../domain/ids';
import { campaignMessageId, mergeValues, subjectValues, type CampaignState } from '../domain/comms/campaigns';
import { instrumentHtml, trackingSecret } from '../domain/comms/tracking';
import { listUnsubscribeHeaders, unsubscribeSecret, unsubscribeUrl } from '../domain/comms/unsubscribe';
import { renderTemplate } from '../domain/templates/templates';
import { campaignStream, loadCampaign, startDueCampaign } from '../commands/comms/campaigns';
import { sendCampaignMessage, type SendDeps } from '../commands/send/sendMessage';
import { campaignIdsUnderWay } from '../projections/campaigns/queries';
import { suppressedAmong } from '../projections/commSuppressions/queries';
import { suppressionAddress } from '../domain/comms/suppressions';
import { contactsForCampaign, type CampaignContact } from '../projections/contacts/queries';
import { bullConnection } from '../infra/redis';
import type { FollowerMetrics } from '../infra/eventstore/followerLease';
import type { Logger } from '../infra/logger';
import { runLogEnqueuer } from './logEnqueuer';
import { CAMPAIGN_ENQUEUER } from './followers';

/**
 * The campaign sender (docs/COMMUNICATIONS.md "Campaigns", "How a campaign is sent").
 *
 * A campaign is sent one page of contacts per BullMQ job. The job of a page is named after the
 * campaign and the revision of its stream the page starts from (`<campaignId>-r<revision>`), and is
 * queued from the log: CampaignSendStarted queues the first page, every CampaignProgressed (the
 * checkpoint a page ends with: the last contact done and the counts) queues the next, delayed until
 * `resumeAt` when the page was paused by the block's quota. CampaignScheduled queues the job of the
 * due start, delayed until `scheduledAt`: it runs the send's checks then and appends
 * CampaignSendStarted, which queues the first page. So no job is ever queued from a request,
 * a replayed event queues nothing twice (the id is taken), and a page acts only when its revision
 * is still the stream's head.
 *
 * A worker that dies mid-page leaves its job stalled; BullMQ hands it to another worker, which runs
 * the page again from the same checkpoint. Every message has an id derived from the campaign and
 * the contact, and a message that already exists is not accepted again (`sendCampaignMessage`), so
 * every contact gets one message however often a page runs.
 */

export const CAMPAIGN_QUEUE = 'motor-campaigns';
/** Seconds a campaign waits when its block cannot send at all (deactivated, domain DNS broken), before it tries again. */
export const BLOCK_UNUSABLE_RETRY_SECONDS = 300;
/** Messages of one page accepted at a time (their appends share the store's group commits). */
export const CAMPAIGN_CONCURRENCY = 16;
/** Errors of the block or its domain, not of one recipient: retrying the next contact would fail the same way. */
const BLOCK_LEVEL_CODES = new Set(['motor_block_inactive', 'from_domain_mismatch', 'DOMAIN_DNS_INCOMPLETE', 'invalid_api_key', 'use_comms_api']);

export interface CampaignJob { campaignId: string; revision: string }

export interface CampaignSenderDeps {
  store: EventStore;
  db: Knex;
  send: SendDeps;
  clock: Clock;
  logger: Logger;
  /** Public auth base URL (AUTH_PUBLIC_URL): unsubscribe links and the tracking endpoints live there. */
  baseUrl: string;
  tokenSecret: string;
  /** Contacts per page (per checkpoint). */
  pageSize: number;
}

export const campaignJobId = (campaignId: string, revision: bigint | string): string => `${campaignId}-r${revision}`;

export function createCampaignQueue(redisUrl: string, prefix = 'motor'): Queue<CampaignJob> {
  return new Queue<CampaignJob>(CAMPAIGN_QUEUE, {
    connection: bullConnection(redisUrl),
    prefix,
    defaultJobOptions: {
      // A page that throws (store, database or Redis trouble) is run again from its checkpoint:
      // 10 attempts 2 s to 17 min apart (about 34 min in all); after that, the enqueuer's sweep
      // retries it every 5 minutes (CampaignEnqueuer.resume).
      attempts: 10,
      backoff: { type: 'exponential', delay: 2000 },
      // Kept so that a replayed event finds its job id taken.
      removeOnComplete: { age: 7 * 24 * 3600 },
      removeOnFail: { age: 30 * 24 * 3600 },
    },
  });
}

/** The job that continues from one event of a campaign's stream, or null when none does. */
function jobOf(e: RecordedEvent, now: Date): { name: string; data: CampaignJob; opts: { jobId: string; delay: number } } | null {
  if (e.type !== 'CampaignSendStarted' && e.type !== 'CampaignProgressed' && e.type !== 'CampaignScheduled') return null;
  const d = e.data as CampaignSendStarted | CampaignProgressed | CampaignScheduled;
  const at = e.type === 'CampaignProgressed' ? (d as CampaignProgressed).resumeAt : e.type === 'CampaignScheduled' ? (d as CampaignScheduled).scheduledAt : undefined;
  const delay = at ? Math.max(0, Date.parse(at) - now.getTime()) : 0;
  const name = e.type === 'CampaignScheduled' ? 'campaign-start' : 'campaign-page';
  return { name, data: { campaignId: d.campaignId, revision: e.revision.toString() }, opts: { jobId: campaignJobId(d.campaignId, e.revision), delay } };
}

type PageResult = 'stale' | 'done' | 'cancelled' | 'progressed' | 'paused' | 'completed' | 'started' | 'failed';

/** A job that ran before its time (the queue's clock ahead of this process's): thrown, so BullMQ runs it again after its backoff. */
export class NotDueYetError extends Error {}

/**
 * Sends one page of a campaign: the contacts after the checkpoint, skipping suppressed addresses,
 * then appends the next checkpoint (or CampaignSendCompleted after the last page) at the revision
 * the page started from.
 */
export async function processCampaignPage(deps: CampaignSenderDeps, job: CampaignJob): Promise<PageResult> {
  const { state, revision } = await loadCampaign(deps.store, job.campaignId);
  if (revision === null || revision.toString() !== job.revision) return 'stale';
  if (state.status === 'scheduled') {
    if (state.scheduledAt !== null && Date.parse(state.scheduledAt) > deps.clock.now().getTime()) throw new NotDueYetError(`campaign ${job.campaignId} is due at ${state.scheduledAt}`);
    return startDueCampaign({ store: deps.store, db: deps.db, clock: deps.clock, directory: deps.send.directory }, state, revision);
  }
  if (state.status !== 'sending' || !state.created || !state.started) return 'done';
  const c = state.created;
  const started = state.started;
  const contacts = await contactsForCampaign(deps.db, c.tenantId, c.listId, state.lastContactId, deps.pageSize);
  const suppressed = await suppressedAmong(deps.db, c.tenantId, contacts.map((x) => x.email));
  const counts: CampaignCounts = { ...state.counts };
  let last = state.lastContactId;
  const unsubSecret = unsubscribeSecret(deps.tokenSecret);
  const trackSecret = trackingSecret(deps.tokenSecret);

  const checkpoint = async (event: DomainEvent<'CampaignProgressed' | 'CampaignSendCompleted'>): Promise<boolean> => {
    try {
      // A stable event id: the retry of this very append after a lost answer is harmless.
      await deps.store.append(campaignStream(c.campaignId), [toEventData(uuidV5(`campaign:${c.campaignId}:checkpoint:${revision}`), event, { actor: 'worker:campaigns' })], {
        expectedRevision: revision,
      });
      return true;
    } catch (err) {
      // Cancelled (or checkpointed by another run of this page) meanwhile: this page's work is done.
      if (err instanceof WrongExpectedRevisionError) return false;
      throw err;
    }
  };
  // Cancelled while this page ran: the messages it accepted are still counted, by a last checkpoint
  // after the cancel (the campaign stays cancelled; the job that checkpoint queues finds nothing to do).
  const tallyAfterCancel = async (): Promise<PageResult> => {
    const latest = await loadCampaign(deps.store, c.campaignId);
    if (latest.state.status !== 'cancelled' || latest.state.deleted) return 'stale';
    if (latest.revision === null || sameCounts(latest.state.counts, counts)) return 'cancelled';
    try {
      await deps.store.append(campaignStream(c.campaignId), [toEventData(uuidV5(`campaign:${c.campaignId}:cancelled-tally`), {
        type: 'CampaignProgressed', data: { campaignId: c.campaignId, tenantId: c.tenantId, lastContactId: last, counts, at: deps.clock.now().toISOString() },
      }, { actor: 'worker:campaigns' })], { expectedRevision: latest.revision });
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError)) throw err;
    }
    return 'cancelled';
  };
  const pause = async (seconds: number, reason: string): Promise<PageResult> => {
    const now = deps.clock.now();
    const ok = await checkpoint({
      type: 'CampaignProgressed',
      data: { campaignId: c.campaignId, tenantId: c.tenantId, lastContactId: last, counts, resumeAt: new Date(now.getTime() + seconds * 1000).toISOString(), pausedReason: reason, at: now.toISOString() },
    });
    return ok ? 'paused' : tallyAfterCancel();
  };

  /** One contact's message; a pause (quota, unusable block) is returned, not thrown. */
  const sendOne = async (contact: CampaignContact): Promise<{ kind: 'accepted' | 'skipped' | 'failed' } | { kind: 'pause'; seconds: number; reason: string }> => {
    const messageId = campaignMessageId(c.campaignId, contact.contactId);
    if (suppressed.has(suppressionAddress(contact.email)) && !(await messageExists(deps.store, messageId))) return { kind: 'skipped' };
    try {
      await sendCampaignMessage(deps.send, {
        motorBlockId: c.motorBlockId, body: messageBody(deps, state, started, contact, messageId, unsubSecret, trackSecret),
        messageId, now: deps.clock.now(), actor: `campaign:${c.campaignId}`,
      });
      return { kind: 'accepted' };
    } catch (err) {
      if (!isDomainError(err)) throw err;
      if (err.code.startsWith('rate_limited_')) {
        const retry = Number(err.details?.retryAfterSeconds);
        return { kind: 'pause', seconds: Number.isFinite(retry) && retry > 0 ? retry : 60, reason: err.code };
      }
      if (BLOCK_LEVEL_CODES.has(err.code)) return { kind: 'pause', seconds: BLOCK_UNUSABLE_RETRY_SECONDS, reason: err.code };
      // A refusal of this recipient (an address the send rules refuse, a sandbox or Free-plan rule): counted, and on to the next.
      deps.logger.info({ campaignId: c.campaignId, contactId: contact.contactId, code: err.code }, 'campaign message refused');
      return { kind: 'failed' };
    }
  };

  // CAMPAIGN_CONCURRENCY messages at a time, so their appends share group commits. The checkpoint
  // counts a chunk's outcomes in contact order up to the first pause: what was accepted after it is
  // found by its message id when the page runs again, and counted then, once.
  for (let i = 0; i < contacts.length; i += CAMPAIGN_CONCURRENCY) {
    // Cancel stops the campaign between chunks: anything appended since the page began is a cancel
    // (or another run's checkpoint, which makes this run stale).
    if ((await deps.store.readStream(campaignStream(c.campaignId), { fromRevision: revision + 1n, maxCount: 1 })).length > 0) return tallyAfterCancel();
    const chunk = contacts.slice(i, i + CAMPAIGN_CONCURRENCY);
    const outcomes = await Promise.all(chunk.map(sendOne));
    for (const [j, o] of outcomes.entries()) {
      if (o.kind === 'pause') return pause(o.seconds, o.reason);
      if (o.kind === 'accepted') counts.accepted++;
      else if (o.kind === 'skipped') counts.skippedSuppressed++;
      else counts.failed++;
      counts.recipients++;
      last = chunk[j].contactId;
    }
  }

  const now = deps.clock.now().toISOString();
  if (contacts.length < deps.pageSize) {
    const ok = await checkpoint({ type: 'CampaignSendCompleted', data: { campaignId: c.campaignId, tenantId: c.tenantId, lastContactId: last, counts, completedAt: now } });
    return ok ? 'completed' : tallyAfterCancel();
  }
  const ok = await checkpoint({ type: 'CampaignProgressed', data: { campaignId: c.campaignId, tenantId: c.tenantId, lastContactId: last, counts, at: now } });
  return ok ? 'progressed' : tallyAfterCancel();
}

const sameCounts = (x: CampaignCounts, y: CampaignCounts): boolean =>
  x.recipients === y.recipients && x.accepted === y.accepted && x.skippedSuppressed === y.skippedSuppressed && x.failed === y.failed;

async function messageExists(store: EventStore, messageId: string): Promise<boolean> {
  return (await store.readStream(streamName('message', messageId), { maxCount: 1 })).length > 0;
}

/** The send request of one contact's message: the template rendered with its values, tracked when asked, with the one-click unsubscribe headers. */
function messageBody(
  deps: CampaignSenderDeps, state: CampaignState, started: CampaignSendStarted, contact: CampaignContact, messageId: string,
  unsubSecret: Buffer, trackSecret: Buffer,
) {
  const c = state.created!;
  const unsubscribe = unsubscribeUrl(deps.baseUrl, unsubSecret, { tenantId: c.tenantId, listId: c.listId, contactId: contact.contactId });
  const values = mergeValues(contact, started.identityName, unsubscribe);
  const rendered = renderTemplate(started.template, values);
  const subject = renderTemplate({ subject: started.template.subject, body_html: null, body_text: null }, subjectValues(values)).subject;
  let html = rendered.body_html;
  if (html !== null && (c.trackOpens || c.trackClicks)) {
    html = instrumentHtml(html, deps.baseUrl, trackSecret, { tenantId: c.tenantId, motorBlockId: c.motorBlockId, campaignId: c.campaignId, messageId }, {
      opens: c.trackOpens, clicks: c.trackClicks,
    });
  }
  return {
    from: c.from, fromName: c.fromName, to: [contact.email], subject, text: rendered.body_text, html,
    headers: listUnsubscribeHeaders(unsubscribe), metadata: { campaign_id: c.campaignId },
  };
}

export function startCampaignWorker(deps: CampaignSenderDeps, redisUrl: string, prefix = 'motor', lockSeconds = 60): Worker<CampaignJob> {
  const worker = new Worker<CampaignJob>(CAMPAIGN_QUEUE, async (job: Job<CampaignJob>) => processCampaignPage(deps, job.data), {
    connection: bullConnection(redisUrl), prefix, concurrency: 4,
    // A worker that dies mid-page leaves its job stalled: it must come back (and run the page again), not fail.
    maxStalledCount: 50,
    lockDuration: lockSeconds * 1000,
    stalledInterval: Math.min(15_000, Math.max(1000, (lockSeconds * 1000) / 4)),
  });
  worker.on('failed', (job, err) => deps.logger.warn({ err, campaignId: job?.data.campaignId, attemptsMade: job?.attemptsMade }, 'campaign page failed'));
  worker.on('error', (err) => deps.logger.error({ err }, 'campaign worker error'));
  return worker;
}

/**
 * Feeds the campaign queue from the log (workers/logEnqueuer.ts). Besides, at start and every
 * `resumeEveryMs`, it queues the head job of every campaign still `sending` or `scheduled` (a job
 * id already taken is a no-op) and retries a head job that failed every attempt: a campaign resumes,
 * and a scheduled one starts, even when Redis lost its jobs or its store was down for longer than
 * the job's retries.
 */
export class CampaignEnqueuer {
  constructor(
    private readonly deps: { db: Knex; store: EventStore; queue: Queue<CampaignJob>; logger: Logger; clock: Clock; metrics?: FollowerMetrics },
    private readonly resumeEveryMs = 300_000,
    private readonly name = CAMPAIGN_ENQUEUER,
  ) {}

  run(signal: AbortSignal): Promise<void> {
    const resume = () => void this.resume().catch((err) => this.deps.logger.warn({ err }, 'campaign resume sweep failed'));
    resume();
    const timer = setInterval(resume, this.resumeEveryMs);
    timer.unref();
    signal.addEventListener('abort', () => clearInterval(timer), { once: true });
    return runLogEnqueuer({ db: this.deps.db, store: this.deps.store, queue: this.deps.queue, logger: this.deps.logger, metrics: this.deps.metrics }, {
      name: this.name,
      types: ['CampaignScheduled', 'CampaignSendStarted', 'CampaignProgressed'],
      omitData: ['template'],
      jobsOf: (events) => {
        const now = this.deps.clock.now();
        return events.map((e) => jobOf(e, now)).filter((j) => j !== null);
      },
    }, signal);
  }

  /**
   * Queues the head job of every campaign under way or scheduled (for a scheduled one, its due
   * start, delayed until then). A head job that failed every attempt
   * (the store or the database down for longer than its backoff) is retried from scratch: its job
   * id is taken, so adding it again would do nothing and the campaign would stay `sending`.
   */
  async resume(): Promise<void> {
    const now = this.deps.clock.now();
    // In pages of ids: however many campaigns are under way, each is looked at once.
    for (let ids = await campaignIdsUnderWay(this.deps.db); ids.length > 0; ids = await campaignIdsUnderWay(this.deps.db, ids[ids.length - 1])) {
      for (const id of ids) await this.resumeOne(id, now);
    }
  }

  private async resumeOne(campaignId: string, now: Date): Promise<void> {
    const events = await this.deps.store.readStream(campaignStream(campaignId));
    const head = events[events.length - 1];
    const job = head ? jobOf(head, now) : null;
    if (!job) return;
    const existing = await this.deps.queue.getJob(job.opts.jobId);
    if (existing && (await existing.isFailed())) {
      this.deps.logger.warn({ campaignId, jobId: job.opts.jobId, attemptsMade: existing.attemptsMade }, 'campaign page had failed every attempt; retrying it');
      await existing.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
    } else if (!existing) {
      await this.deps.queue.add(job.name, job.data, job.opts);
    }
  }
}
