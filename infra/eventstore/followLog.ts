import type { EventStore, GlobalPosition, LogBatch } from '../../domain/eventStore';
import type { Logger } from '../logger';
import { sleep } from '../sleep';

/**
 * A consumer that follows the event log for as long as it runs: it asks where to start, subscribes
 * from there, hands over every batch, and when the store or its own work fails it logs, waits a
 * second and starts again from `start()` (its checkpoint, so nothing is skipped; the event stream's
 * feed answers the position it last handed over). The background followers (the enqueuers, the
 * webhook dispatcher, the pause notices) run it through followLogAlone (./followerLease.ts, on infra/lease.ts), in one
 * worker process at a time; the event stream's feed runs it in every API process, one per
 * process's clients. Projections have their own runner (one transaction per batch with their read
 * model).
 */
export interface LogFollower {
  /** Names the follower in the log line of a failure. */
  name: string;
  /** The position to read after, asked again on every (re)start. */
  start(): Promise<GlobalPosition | null>;
  types: readonly string[];
  /** Top-level data keys never read (left out of the subscription). */
  omitData?: readonly string[];
  batchSize?: number;
  /**
   * Starts a batch at most this often while the log keeps coming, as the projections'
   * PROJECTION_BATCH_INTERVAL_MS (docs/PROJECTIONS.md "Batch interval"): a batch that was not
   * full waits for the rest of the interval, so events arriving meanwhile join the next one.
   * Default 0 (every batch at once: the delivery enqueuer, whose batches are on the way to the MX).
   */
  minBatchIntervalMs?: number;
  handle(batch: LogBatch): Promise<void>;
  /** followLogAlone only: how often a process without the follower's lease tries to take it. Default LEASE_RETRY_MS (2 s). */
  leaseRetryMs?: number;
  /**
   * followLogAlone only: called when this process stops following (shutdown, or the lease lost),
   * before it gives the lease up, so that the next holder starts from the checkpoint of all this
   * one handled, and no timer of this one writes the row after the next holder has.
   */
  stopped?(): Promise<void>;
}

/**
 * A consumer's batch interval (the projections' PROJECTION_BATCH_INTERVAL_MS, a follower's
 * minBatchIntervalMs): after a batch handled from `startedAt`, waits for the rest of `intervalMs`
 * so that events arriving meanwhile join the next batch; not after a full batch, or one the store
 * marked `more` (the log is ahead: read on at once).
 */
export async function awaitBatchInterval(batch: LogBatch, batchSize: number, intervalMs: number, startedAt: number, signal: AbortSignal): Promise<void> {
  const rest = intervalMs - (performance.now() - startedAt);
  if (rest > 0 && batch.events.length < batchSize && batch.more !== true) await sleep(rest, signal);
}

export async function followLog(store: EventStore, logger: Logger, follower: LogFollower, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      const after = await follower.start();
      const batchSize = follower.batchSize ?? 500;
      const interval = follower.minBatchIntervalMs ?? 0;
      for await (const batch of store.subscribeToAll({ after, batchSize, signal, types: follower.types, omitData: follower.omitData })) {
        const started = performance.now();
        await follower.handle(batch);
        await awaitBatchInterval(batch, batchSize, interval, started, signal);
      }
    } catch (err) {
      if (signal.aborted) return;
      logger.error({ err }, `${follower.name} failed; retrying`);
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}
