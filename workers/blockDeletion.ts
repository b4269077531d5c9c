import type { Knex } from 'knex';
import { Queue, Worker, type Job } from 'bullmq';
import type { EventStore, GlobalPosition, RecordedEvent } from '../domain/eventStore';
import { WrongExpectedRevisionError, streamName } from '../domain/eventStore';
import { toEventData, type BlockSuppressionLifted, type EmailOpened, type MessageAccepted, type MotorBlockDeletionRequested, type WebhookDeliveryQueued, type ExportRequested } from '../domain/events';
import { newId, type Clock } from '../domain/ids';
import { decide, evolve, type MotorBlockCommand, type MotorBlockState } from '../domain/motorBlock/motorBlock';
import { loadBlock } from '../commands/blocks/grants';
import { directoryRowShows, pollUntil } from '../commands/readYourWrites';
import { DIRECTORY_CACHE_TTL_MS } from '../commands/directoryCache';
import { bullConnection } from '../infra/redis';
import { CHECKPOINTS, runLogEnqueuer } from './logEnqueuer';
import { BLOCK_DELETION_ENQUEUER } from './followers';
import { WEBHOOK_DISPATCHER } from './webhooks/dispatcher';
import type { FollowerMetrics } from '../infra/eventstore/followerLease';
import type { Logger } from '../infra/logger';

/**
 * The Motor Block deletion job (docs/BLOCKS.md "Deletion"). DELETE appends
 * MotorBlockDeletionRequested{jobId}; a subscriber (BlockDeletionEnqueuer) turns it into a BullMQ
 * job whose id IS the jobId, so a replayed event enqueues nothing twice. The job:
 *
 *   1. with deleteHistory: waits until the log followers that create streams of a block's history
 *      (the webhook dispatcher: `webhookDelivery-<id>`) are past the deletion request, so none of
 *      them adds such a stream after the scan (each queues nothing for a block from its request
 *      on); up to 60 s, else the attempt fails and BullMQ runs it again later; then until the
 *      block's directory row shows the request and the directory cache's TTL has passed, so no
 *      send, SMTP session or tracking hit still takes the block for an active one;
 *   2. MotorBlockDeletionStarted (status running) on the block's stream;
 *   3. with deleteHistory: finds the block's streams by scanning the log (message-<id> of every
 *      MessageAccepted of the block, smtpAuth-<block>, smtpSubmission-<block>, webhookDelivery-<id>
 *      of its webhook deliveries, export-<id> of its export jobs, tracking-<messageId> of its
 *      campaign opens and clicks) and removes them
 *      with EventStore.deleteStreams; the scan reads the log at least up to MotorBlockDeletionStarted;
 *   4. appends the tombstone MotorBlockDeleted (status completed); projections react to it.
 *
 * Every step is idempotent: the decider emits nothing for a step already recorded, deleting a
 * stream that is gone is a no-op, and the block's stream itself is never deleted (it holds the
 * tombstone and keeps the status readable). A crash anywhere re-runs the job from the top.
 */

export const BLOCK_DELETION_QUEUE = 'motor-block-deletion';
export interface BlockDeletionJob { motorBlockId: string; jobId: string }

export function createBlockDeletionQueue(redisUrl: string, prefix = 'motor'): Queue<BlockDeletionJob> {
  return new Queue<BlockDeletionJob>(BLOCK_DELETION_QUEUE, {
    connection: bullConnection(redisUrl),
    prefix,
    defaultJobOptions: {
      attempts: 6,
      backoff: { type: 'exponential', delay: 2000 },
      removeOnComplete: { age: 30 * 24 * 3600 },
      removeOnFail: { age: 90 * 24 * 3600 },
    },
  });
}

export interface BlockDeletionDeps {
  store: EventStore; db: Knex; clock: Clock; logger: Logger; scanBatch?: number;
  /**
   * Checkpoint names (motor_workers.checkpoints) of the followers the history scan waits for, and
   * how long (default: the webhook dispatcher, up to 60 s).
   */
  followers?: { names: readonly string[]; timeoutMs?: number };
  /**
   * How long the hot paths (POST /v1/send, SMTP, tracking hits) may still read the block's old
   * status from their directory cache once the directory row shows the request (default: the
   * cache's TTL, commands/directoryCache.ts). With deleteHistory the job waits for the row, then
   * this long, before it starts.
   */
  directoryCacheTtlMs?: number;
}

/** Margin over the cache TTL: a cache load that began just before the row changed can resolve a moment later. */
const CACHE_SETTLE_MARGIN_MS = 250;

/** A follower is not past the deletion request yet: the attempt fails and BullMQ runs it again later. */
export class FollowersBehindError extends Error {
  constructor(readonly behind: string[], readonly requestPosition: string) {
    super(`log followers not past the deletion request (at ${requestPosition}) yet: ${behind.join(', ')}`);
    this.name = 'FollowersBehindError';
  }
}

/**
 * Resolves once every follower's checkpoint is at or past `position`; throws FollowersBehindError
 * after the timeout. A follower without a checkpoint row has not handled anything yet: behind.
 */
export async function awaitFollowers(deps: BlockDeletionDeps, position: GlobalPosition): Promise<void> {
  const { names = [WEBHOOK_DISPATCHER], timeoutMs = 60_000 } = deps.followers ?? {};
  let behind: string[] = [...names];
  const caughtUp = await pollUntil(async () => {
    const rows: Array<{ name: string; position: string | null }> = names.length === 0 ? [] : await deps.db.table(CHECKPOINTS).whereIn('name', names).select('name', 'position');
    const at = new Map(rows.map((r) => [r.name, r.position]));
    behind = names.filter((n) => {
      const p = at.get(n);
      return !p || deps.store.comparePositions(p, position) < 0;
    });
    return behind.length === 0;
  }, timeoutMs);
  if (!caughtUp) throw new FollowersBehindError(behind, position);
}

/**
 * Resolves once no process can still take the block for an active one: the directory row shows
 * the request (the block has been inactive since an earlier event), then the directory cache's
 * TTL has passed. Without it a send that read the cache up to 2 s after the deactivation could
 * append its message after the scan, and the message would outlive the block's history.
 */
async function awaitDirectorySettled(deps: BlockDeletionDeps, motorBlockId: string, requested: RecordedEvent): Promise<void> {
  const { timeoutMs = 60_000 } = deps.followers ?? {};
  // Not a read-your-writes wait (nothing answers a caller here): it fails the job instead of reporting a give-up.
  if (!(await pollUntil(() => directoryRowShows(deps.db, 'motor_blocks', motorBlockId, requested.revision), timeoutMs))) {
    throw new FollowersBehindError(['directory'], requested.position);
  }
  const ttlMs = deps.directoryCacheTtlMs ?? DIRECTORY_CACHE_TTL_MS;
  if (ttlMs > 0) await new Promise((r) => setTimeout(r, ttlMs + CACHE_SETTLE_MARGIN_MS));
}

async function step(deps: BlockDeletionDeps, motorBlockId: string, command: MotorBlockCommand): Promise<MotorBlockState> {
  for (let attempt = 0; ; attempt++) {
    const { state, revision } = await loadBlock(deps.store, motorBlockId);
    const events = decide(command, state);
    if (events.length === 0) return state;
    try {
      await deps.store.append(streamName('motorBlock', motorBlockId), events.map((e) => toEventData(newId(), e, { actor: 'worker:block-deletion' })), {
        expectedRevision: revision === null ? 'no_stream' : revision,
      });
      return events.reduce(evolve, state);
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) || attempt >= 5) throw err;
    }
  }
}

/** The log up to the deletion's start could not be read in time (a transaction held it back): BullMQ runs the job again later. */
export class HistoryScanIncompleteError extends Error {
  constructor(readonly reached: GlobalPosition | null, readonly wanted: GlobalPosition) {
    super(`the history scan reached ${reached ?? 'nothing'} but not ${wanted}: the log is held back by a transaction still running`);
    this.name = 'HistoryScanIncompleteError';
  }
}

/**
 * The block's history streams and how many events they hold, from one pass over the log.
 *
 * readAll hands over a prefix of the log: nothing that sorts after a transaction still running
 * (PostgreSQL: anywhere in the cluster). A short page is the end of that prefix, not of the log,
 * so with `reach` the scan goes on (looking again every 100 ms, up to `timeoutMs`) until it has
 * read the event at `reach.position`: every stream created by an append committed before that
 * event was appended is then seen.
 */
export async function findHistoryStreams(
  store: EventStore, motorBlockId: string, batch = 1000, reach?: { position: GlobalPosition; timeoutMs?: number },
): Promise<{ streams: string[]; messages: number; events: number }> {
  const deadline = Date.now() + (reach?.timeoutMs ?? 60_000);
  const own = new Set([streamName('smtpAuth', motorBlockId), streamName('smtpSubmission', motorBlockId)]);
  const messageStreams = new Set<string>();
  const present = new Set<string>();
  let events = 0;
  let after: GlobalPosition | null = null;
  for (;;) {
    const page: RecordedEvent[] = await store.readAll({ after, maxCount: batch });
    for (const e of page) {
      if (e.type === 'MessageAccepted' && (e.data as MessageAccepted).motorBlockId === motorBlockId) messageStreams.add(e.streamId);
      // Webhook deliveries carry the recipient and the message's metadata: history too.
      if (e.type === 'WebhookDeliveryQueued' && (e.data as WebhookDeliveryQueued).motorBlockId === motorBlockId) own.add(e.streamId);
      // So do export jobs (their filters can name recipients; their files go with their rows).
      if (e.type === 'ExportRequested' && (e.data as ExportRequested).motorBlockId === motorBlockId) own.add(e.streamId);
      // And the opens and clicks of its campaign mail (tracking-<messageId>: recipient, user agent, address).
      if ((e.type === 'EmailOpened' || e.type === 'LinkClicked') && (e.data as EmailOpened).motorBlockId === motorBlockId) own.add(e.streamId);
      // And the lifts from its suppression list (blockSuppression-<id>: the recipient's address).
      if (e.type === 'BlockSuppressionLifted' && (e.data as BlockSuppressionLifted).motorBlockId === motorBlockId) own.add(e.streamId);
      if (messageStreams.has(e.streamId) || own.has(e.streamId)) {
        events++;
        present.add(e.streamId);
      }
    }
    if (page.length > 0) after = page[page.length - 1].position;
    if (page.length === batch) continue;
    if (!reach || (after !== null && store.comparePositions(after, reach.position) >= 0)) break;
    if (Date.now() >= deadline) throw new HistoryScanIncompleteError(after, reach.position);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { streams: [...present], messages: messageStreams.size, events };
}

export async function processBlockDeletion(deps: BlockDeletionDeps, job: BlockDeletionJob): Promise<'completed' | 'stale'> {
  const { state } = await loadBlock(deps.store, job.motorBlockId);
  if (state === null || state.deletion?.jobId !== job.jobId) return 'stale';
  if (state.status === 'deleted') return 'completed';
  const ofThisJob = (type: string) => async () => (await deps.store.readStream(streamName('motorBlock', job.motorBlockId)))
    .findLast((e) => e.type === type && (e.data as { jobId?: string }).jobId === job.jobId);
  if (state.deletion.deleteHistory) {
    const requested = await ofThisJob('MotorBlockDeletionRequested')();
    if (!requested) throw new Error(`MotorBlockDeletionRequested of job ${job.jobId} is not in the stream of block ${job.motorBlockId}`);
    await awaitFollowers(deps, requested.position);
    await awaitDirectorySettled(deps, job.motorBlockId, requested);
  }
  // Only once the followers are past the request and no cache shows the block active: every
  // stream they created for the block was committed before MotorBlockDeletionStarted (but for a
  // check made a moment before and its append), and the scan reads the log at least up to it.
  await step(deps, job.motorBlockId, { type: 'StartMotorBlockDeletion', data: { jobId: job.jobId, now: deps.clock.now() } });
  let found = { streams: [] as string[], messages: 0, events: 0 };
  if (state.deletion.deleteHistory) {
    const started = await ofThisJob('MotorBlockDeletionStarted')();
    if (!started) throw new Error(`MotorBlockDeletionStarted of job ${job.jobId} is not in the stream of block ${job.motorBlockId}`);
    found = await findHistoryStreams(deps.store, job.motorBlockId, deps.scanBatch, { position: started.position });
    for (let i = 0; i < found.streams.length; i += 500) await deps.store.deleteStreams(found.streams.slice(i, i + 500));
  }
  await step(deps, job.motorBlockId, {
    type: 'CompleteMotorBlockDeletion',
    data: {
      jobId: job.jobId, historyDeleted: state.deletion.deleteHistory, messagesDeleted: found.messages, streamsDeleted: found.streams.length,
      eventsDeleted: found.events, now: deps.clock.now(),
    },
  });
  deps.logger.info({ motorBlockId: job.motorBlockId, jobId: job.jobId, ...found, streams: found.streams.length }, 'Motor Block deleted');
  return 'completed';
}

export function startBlockDeletionWorker(deps: BlockDeletionDeps, redisUrl: string, prefix = 'motor'): Worker<BlockDeletionJob> {
  const worker = new Worker<BlockDeletionJob>(
    BLOCK_DELETION_QUEUE,
    async (job: Job<BlockDeletionJob>) => processBlockDeletion(deps, job.data),
    {
      connection: bullConnection(redisUrl), prefix, concurrency: 2,
      // A crashed worker's job comes back (the job is idempotent) instead of failing.
      maxStalledCount: 20, stalledInterval: 15_000, lockDuration: 120_000,
    },
  );
  worker.on('failed', (job, err) => {
    deps.logger.warn({ err, ...job?.data, attemptsMade: job?.attemptsMade }, 'block deletion job failed');
    if (job && job.attemptsMade >= (job.opts.attempts ?? 1)) {
      void step(deps, job.data.motorBlockId, { type: 'FailMotorBlockDeletion', data: { jobId: job.data.jobId, reason: String(err?.message ?? err).slice(0, 500), now: deps.clock.now() } })
        .catch((e) => deps.logger.error({ err: e }, 'could not record the failed block deletion'));
    }
  });
  worker.on('error', (err) => deps.logger.error({ err }, 'block deletion worker error'));
  return worker;
}

/** Feeds the deletion queue from the log (never from the request path; workers/logEnqueuer.ts). */
export class BlockDeletionEnqueuer {
  constructor(
    private readonly db: Knex,
    private readonly store: EventStore,
    private readonly queue: Queue<BlockDeletionJob>,
    private readonly logger: Logger,
    private readonly metrics?: FollowerMetrics,
    private readonly name = BLOCK_DELETION_ENQUEUER,
  ) {}

  run(signal: AbortSignal): Promise<void> {
    return runLogEnqueuer({ db: this.db, store: this.store, queue: this.queue, logger: this.logger, metrics: this.metrics }, {
      name: this.name,
      types: ['MotorBlockDeletionRequested'],
      jobsOf: (events) => events.map((e) => {
        const d = e.data as MotorBlockDeletionRequested;
        return { name: 'delete-block', data: { motorBlockId: d.motorBlockId, jobId: d.jobId }, opts: { jobId: d.jobId } };
      }),
    }, signal);
  }
}
