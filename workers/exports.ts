import { gzipSync } from 'node:zlib';
import type { Knex } from 'knex';
import { Queue, Worker, type Job } from 'bullmq';
import { streamName, type EventStore } from '../domain/eventStore';
import { asDomainEvent, toEventData, type ExportRequested } from '../domain/events';
import { newId, type Clock } from '../domain/ids';
import { EXPORT_FILES } from '../commands/exports/exports';
import { searchLogs } from '../projections/messages';
import { EXPORTS_SCHEMA } from '../projections/exports/projection';
import { messageDto } from '../read-api/messages/present';
import { LONG_QUERY_TIMEOUT_MS, withQueryTimeout } from '../infra/db';
import { bullConnection } from '../infra/redis';
import type { FollowerMetrics } from '../infra/eventstore/followerLease';
import type { Logger } from '../infra/logger';
import { runLogEnqueuer } from './logEnqueuer';
import { EXPORT_ENQUEUER } from './followers';

/**
 * Builds export files (docs/EXPORTS.md). ExportRequested on `export-<id>` becomes a BullMQ job
 * whose id is the job id (an enqueuer on the log: a replay adds nothing twice). The job pages
 * through the logs read model with the request's window and filters, 1,000 messages a page,
 * writes each page as one gzip member (their concatenation is one valid gzip file) into
 * motor_exports.files, then appends ExportCompleted. A crash re-runs the job from the top: it
 * first drops what an earlier run stored.
 */

export const EXPORT_QUEUE = 'motor-exports';
/** Rows per file at most; a larger window is cut there and the job says `truncated`. */
export const EXPORT_MAX_ROWS = 1_000_000;
/** Days a file can be downloaded after it was built. */
export const EXPORT_RETENTION_DAYS = 7;
const PAGE = 1000;

export interface ExportJob { jobId: string }
export interface ExportWorkerDeps { store: EventStore; db: Knex; clock: Clock; logger: Logger }

export function createExportQueue(redisUrl: string, prefix = 'motor'): Queue<ExportJob> {
  return new Queue<ExportJob>(EXPORT_QUEUE, {
    connection: bullConnection(redisUrl),
    prefix,
    defaultJobOptions: {
      attempts: 4,
      backoff: { type: 'exponential', delay: 5000 },
      removeOnComplete: { age: 30 * 24 * 3600 },
      removeOnFail: { age: 30 * 24 * 3600 },
    },
  });
}

/** The job's request and its stream's revision, or null when it is unknown or already finished (completed or failed). */
async function openExport(store: EventStore, jobId: string): Promise<{ requested: ExportRequested; revision: bigint } | null> {
  const events = await store.readStream(streamName('export', jobId));
  const requested = events.map(asDomainEvent).find((e) => e?.type === 'ExportRequested')?.data as ExportRequested | undefined;
  if (!requested || events.some((e) => e.type !== 'ExportRequested')) return null;
  return { requested, revision: events[events.length - 1].revision };
}

/** Runs one export job; 'done' when it was already finished (a replayed job). */
export async function processExport(deps: ExportWorkerDeps, jobId: string): Promise<'completed' | 'done'> {
  const job = await openExport(deps.store, jobId);
  if (!job) return 'done';
  const { requested } = job;
  await deps.db.table(EXPORT_FILES).where({ job_id: jobId }).delete();
  let rows = 0;
  let bytes = 0;
  let seq = 0;
  let cursor: string | null = null;
  let truncated = false;
  for (;;) {
    const page = await searchLogs(deps.db, {
      motorBlockId: requested.motorBlockId, from: requested.from, to: requested.to, query: requested.query, status: requested.status,
      limit: Math.min(PAGE, EXPORT_MAX_ROWS - rows), cursor,
    });
    if (page.items.length > 0) {
      const text = page.items.map((m) => JSON.stringify(messageDto(m, requested.includePII))).join('\n') + '\n';
      bytes += Buffer.byteLength(text);
      rows += page.items.length;
      await deps.db.table(EXPORT_FILES).insert({ job_id: jobId, seq: seq++, data: gzipSync(text) });
    }
    if (!page.nextCursor) break;
    if (rows >= EXPORT_MAX_ROWS) {
      truncated = true;
      break;
    }
    cursor = page.nextCursor;
  }
  const now = deps.clock.now();
  await deps.store.append(streamName('export', jobId), [toEventData(newId(), {
    type: 'ExportCompleted',
    data: {
      jobId, motorBlockId: requested.motorBlockId, rows, bytes, truncated,
      expiresAt: new Date(now.getTime() + EXPORT_RETENTION_DAYS * 86_400_000).toISOString(), completedAt: now.toISOString(),
    },
  }, { actor: 'worker:exports' })], { expectedRevision: job.revision });
  return 'completed';
}

export function startExportWorker(given: ExportWorkerDeps, redisUrl: string, prefix = 'motor'): Worker<ExportJob> {
  // The long deadline (infra/db.ts LONG_QUERY_TIMEOUT_MS): a page of 1,000 messages searched over
  // a window of months may take far longer than a page of the logs route; cut, it would be cut
  // again at every attempt.
  const deps = { ...given, db: withQueryTimeout(given.db, LONG_QUERY_TIMEOUT_MS) };
  const worker = new Worker<ExportJob>(EXPORT_QUEUE, async (job: Job<ExportJob>) => processExport(deps, job.data.jobId), {
    connection: bullConnection(redisUrl), prefix, concurrency: 2, maxStalledCount: 10,
  });
  worker.on('failed', (job, err) => {
    deps.logger.warn({ err, jobId: job?.data.jobId, attemptsMade: job?.attemptsMade }, 'export job failed');
    if (!job || job.attemptsMade < (job.opts.attempts ?? 1)) return;
    void (async () => {
      const open = await openExport(deps.store, job.data.jobId);
      if (!open) return;
      await deps.db.table(EXPORT_FILES).where({ job_id: job.data.jobId }).delete();
      await deps.store.append(streamName('export', job.data.jobId), [toEventData(newId(), {
        type: 'ExportFailed', data: { jobId: job.data.jobId, motorBlockId: open.requested.motorBlockId, reason: String(err?.message ?? err).slice(0, 500), failedAt: deps.clock.now().toISOString() },
      }, { actor: 'worker:exports' })], { expectedRevision: open.revision });
    })().catch((e) => deps.logger.error({ err: e }, 'could not record the failed export'));
  });
  worker.on('error', (err) => deps.logger.error({ err }, 'export worker error'));
  return worker;
}

/**
 * Feeds the export queue from the log (workers/logEnqueuer.ts), and once an hour drops files past
 * their retention and files whose job is gone from the read model (a block deleted with its history).
 */
export class ExportEnqueuer {
  constructor(
    private readonly db: Knex,
    private readonly store: EventStore,
    private readonly queue: Queue<ExportJob>,
    private readonly logger: Logger,
    private readonly metrics?: FollowerMetrics,
    private readonly name = EXPORT_ENQUEUER,
  ) {}

  run(signal: AbortSignal): Promise<void> {
    const sweep = () => void this.sweep().catch((err) => this.logger.warn({ err }, 'export file sweep failed'));
    sweep();
    const timer = setInterval(sweep, 3600_000);
    timer.unref();
    signal.addEventListener('abort', () => clearInterval(timer), { once: true });
    return runLogEnqueuer({ db: this.db, store: this.store, queue: this.queue, logger: this.logger, metrics: this.metrics }, {
      name: this.name,
      types: ['ExportRequested'],
      jobsOf: (events) => events.map((e) => ({ name: 'export', data: { jobId: (e.data as ExportRequested).jobId }, opts: { jobId: (e.data as ExportRequested).jobId } })),
    }, signal);
  }

  async sweep(): Promise<void> {
    await this.db.raw(`DELETE FROM ${EXPORT_FILES} f WHERE f.created_at < now() - interval '${EXPORT_RETENTION_DAYS + 1} days'
      OR (f.created_at < now() - interval '1 hour' AND NOT EXISTS (SELECT 1 FROM ${EXPORTS_SCHEMA}.jobs j WHERE j.id = f.job_id))`);
  }
}
