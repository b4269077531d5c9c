import type { Knex } from 'knex';
import type { JobsOptions, Queue } from 'bullmq';
import type { EventStore, GlobalPosition, RecordedEvent } from '../domain/eventStore';
import { followLogAlone, type FollowerMetrics } from '../infra/eventstore/followerLease';
import { withSetupLock } from '../infra/db';
import type { Logger } from '../infra/logger';

/**
 * The one way work reaches a BullMQ queue: from the event log, never from the request path. A
 * subscriber reads the log from its checkpoint, turns each batch into jobs with stable ids, adds
 * them, then saves the checkpoint (at most once a second, CheckpointWriter). A crash re-adds the
 * jobs of the batches since the last write, which BullMQ ignores (the ids are taken). Used by the delivery, block-deletion and export enqueuers.
 */

export const CHECKPOINTS = 'motor_workers.checkpoints';

export async function initCheckpoints(db: Knex): Promise<void> {
  await withSetupLock(db, 'motor_workers', async (trx) => {
    await trx.raw('CREATE SCHEMA IF NOT EXISTS motor_workers');
    await trx.raw(`CREATE TABLE IF NOT EXISTS ${CHECKPOINTS} (name text PRIMARY KEY, position text, updated_at timestamptz NOT NULL DEFAULT now())`);
  });
}

/**
 * How often a follower whose batches change nothing else writes its checkpoint. Every batch
 * written was one committed transaction (a WAL flush) per batch per follower, several a second
 * under load, for a position that only matters after a restart: re-reading up to this much of the
 * log then re-adds jobs BullMQ already holds (ids are taken) and repeats no-op batches.
 */
export const CHECKPOINT_INTERVAL_MS = 1000;

/**
 * A follower's checkpoint row, written at most every CHECKPOINT_INTERVAL_MS: a batch inside the
 * interval leaves its position pending, and a timer writes the latest pending position when the
 * interval is up (so an idle follower's row still reaches the last batch it handled, which block
 * deletion waits for). Writes never go backwards: the timer's write and the follower's own are
 * serialised, and `drain()` lets a follower that writes the row in its own transaction wait for
 * the timer's write first.
 */
export class CheckpointWriter {
  private pending: GlobalPosition | null = null;
  private lastWriteAt = 0;
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Knex,
    private readonly name: string,
    private readonly logger: Logger,
    private readonly intervalMs = CHECKPOINT_INTERVAL_MS,
  ) {}

  /** Records `position`: written now if the interval is up, else by the timer. */
  async save(position: GlobalPosition): Promise<void> {
    if (Date.now() - this.lastWriteAt >= this.intervalMs) {
      await this.drain();
      await this.write(this.db, position);
      return;
    }
    this.pending = position;
    this.arm();
  }

  /** Cancels the timer and waits for a write in flight; the pending position is dropped (the caller writes a later one). */
  async drain(): Promise<void> {
    await this.settle();
    // After the write in flight: a failed one puts its position back as pending, which a flush on
    // stop would then write over the caller's later one.
    this.pending = null;
  }

  /** The position to follow from on a (re)start: drained, then read from the row. */
  async restart(): Promise<GlobalPosition | null> {
    await this.drain();
    return (await this.db.table(CHECKPOINTS).where({ name: this.name }).first('position'))?.position ?? null;
  }

  /** Cancels the timer and waits for a write in flight. */
  private async settle(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.writing;
  }

  /** The timer writes what is pending `delayMs` from now (default: when the interval since the last write is up). */
  private arm(delayMs = this.intervalMs - (Date.now() - this.lastWriteAt)): void {
    this.timer ??= setTimeout(() => {
      this.timer = null;
      this.writing = this.writing.then(() => this.writePending());
    }, Math.max(1, delayMs));
    this.timer.unref();
  }

  /** Writes `position` through `db` (the follower's own transaction, after drain()). */
  async write(db: Knex | Knex.Transaction, position: GlobalPosition): Promise<void> {
    await db.table(CHECKPOINTS).insert({ name: this.name, position, updated_at: db.fn.now() }).onConflict('name').merge();
    this.lastWriteAt = Date.now();
  }

  /** Writes what is pending now (on stop). */
  async flush(): Promise<void> {
    await this.settle();
    await this.writePending();
  }

  private async writePending(): Promise<void> {
    const position = this.pending;
    if (position === null) return;
    this.pending = null;
    try {
      await this.write(this.db, position);
    } catch (err) {
      // Tried again in an interval (an idle follower's row must still get there), unless a later
      // position is pending by then.
      if (this.pending === null) this.pending = position;
      this.arm(this.intervalMs);
      this.logger.warn({ err, follower: this.name }, 'checkpoint write failed; kept pending');
    }
  }
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

/**
 * Runs until the signal aborts, in one process at a time (infra/eventstore/followerLease.ts); store
 * or Redis trouble is logged and retried (infra/eventstore/followLog.ts).
 */
export async function runLogEnqueuer<T>(
  deps: { db: Knex; store: EventStore; queue: Queue<T>; logger: Logger; metrics?: FollowerMetrics },
  enqueuer: LogEnqueuer<T>,
  signal: AbortSignal,
): Promise<void> {
  const checkpoint = new CheckpointWriter(deps.db, enqueuer.name, deps.logger);
  await followLogAlone(deps, {
    name: enqueuer.name,
    types: enqueuer.types,
    omitData: enqueuer.omitData,
    start: () => checkpoint.restart(),
    handle: async (batch) => {
      const jobs = enqueuer.jobsOf(batch.events);
      // bullmq's addBulk types the job name through the queue's generics; the jobs are T's.
      if (jobs.length > 0) await (deps.queue as unknown as Queue).addBulk(jobs);
      await checkpoint.save(batch.position);
    },
    stopped: () => checkpoint.flush(),
  }, signal);
}
