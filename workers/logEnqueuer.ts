import type { Knex } from 'knex';
import type { JobsOptions, Queue } from 'bullmq';
import type { EventStore, RecordedEvent } from '../domain/eventStore';
import { followLog } from '../infra/eventstore/followLog';
import { withSetupLock } from '../infra/db';
import type { Logger } from '../infra/logger';

/**
 * The one way work reaches a BullMQ queue: from the event log, never from the request path. A
 * subscriber reads the log from its checkpoint, turns each batch into jobs with stable ids, adds
 * them, then saves the checkpoint. A crash in between re-adds some jobs, which BullMQ ignores (the
 * ids are taken). Used by the delivery, block-deletion and export enqueuers.
 */

export const CHECKPOINTS = 'motor_workers.checkpoints';

export async function initCheckpoints(db: Knex): Promise<void> {
  await withSetupLock(db, 'motor_workers', async (trx) => {
    await trx.raw('CREATE SCHEMA IF NOT EXISTS motor_workers');
    await trx.raw(`CREATE TABLE IF NOT EXISTS ${CHECKPOINTS} (name text PRIMARY KEY, position text, updated_at timestamptz NOT NULL DEFAULT now())`);
  });
}

export interface QueuedJob<T> { name: string; data: T; opts: JobsOptions & { jobId: string } }

export interface LogEnqueuer<T> {
  /** Checkpoint name (one row of motor_workers.checkpoints). */
  name: string;
  /** The only event types the store hands over. */
  types: readonly string[];
  /** Top-level data keys never read (left out of the subscription). */
  omitData?: readonly string[];
  jobsOf(events: RecordedEvent[]): QueuedJob<T>[];
}

/** Runs until the signal aborts; store or Redis trouble is logged and retried (infra/eventstore/followLog.ts). */
export function runLogEnqueuer<T>(
  deps: { db: Knex; store: EventStore; queue: Queue<T>; logger: Logger },
  enqueuer: LogEnqueuer<T>,
  signal: AbortSignal,
): Promise<void> {
  return followLog(deps.store, deps.logger, {
    name: enqueuer.name,
    types: enqueuer.types,
    omitData: enqueuer.omitData,
    start: async () => (await deps.db.table(CHECKPOINTS).where({ name: enqueuer.name }).first('position'))?.position ?? null,
    handle: async (batch) => {
      const jobs = enqueuer.jobsOf(batch.events);
      // bullmq's addBulk types the job name through the queue's generics; the jobs are T's.
      if (jobs.length > 0) await (deps.queue as unknown as Queue).addBulk(jobs);
      await deps.db.table(CHECKPOINTS).insert({ name: enqueuer.name, position: batch.position, updated_at: deps.db.fn.now() }).onConflict('name').merge();
    },
  }, signal);
}
