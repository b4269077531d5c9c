import type { Knex } from 'knex';
import type { Queue } from 'bullmq';
import type { EventStore, RecordedEvent } from '../domain/eventStore';
import { MESSAGE_CONTENT_FIELDS, type DeliveryDeferred, type MessageAccepted } from '../domain/events';
import type { FollowerMetrics } from '../infra/eventstore/followerLease';
import type { Logger } from '../infra/logger';
import { runLogEnqueuer, type QueuedJob } from './logEnqueuer';
import { DELIVERY_ENQUEUER } from './followers';
import { jobIdFor, type DeliveryJob } from './queue';

/**
 * Feeds the delivery queue from the event log, never from the request path: a MessageAccepted
 * becomes a delivery job, a DeliveryDeferred a delayed retry job due at its nextAttemptAt (one per
 * message, attempt and time: deferrals recorded together share it). Both jobs carry the message's
 * contentBytes when the event has it, so the worker waits for room before reading the message
 * (docs/DELIVERY.md "Memory for messages being delivered"). The checkpoint is saved after
 * the jobs are added, so a crash re-adds some jobs, which BullMQ ignores (stable job ids;
 * workers/logEnqueuer.ts).
 */

/** The only events the enqueuer is sent (the store skips the rest). */
const ENQUEUED_TYPES = ['MessageAccepted', 'DeliveryDeferred'] as const;

export function jobsFor(events: RecordedEvent[], now: Date): QueuedJob<DeliveryJob>[] {
  const jobs: QueuedJob<DeliveryJob>[] = [];
  for (const e of events) {
    if (e.type === 'MessageAccepted') {
      const { messageId, contentBytes } = e.data as MessageAccepted;
      jobs.push({ name: 'deliver', data: contentBytes === undefined ? { messageId } : { messageId, contentBytes }, opts: { jobId: jobIdFor(messageId) } });
    } else if (e.type === 'DeliveryDeferred') {
      const d = e.data as DeliveryDeferred;
      const delay = Math.max(0, Date.parse(d.nextAttemptAt) - now.getTime());
      const data = d.contentBytes === undefined ? { messageId: d.messageId } : { messageId: d.messageId, contentBytes: d.contentBytes };
      jobs.push({ name: 'deliver', data, opts: { jobId: jobIdFor(d.messageId, d), delay } });
    }
  }
  return jobs;
}

export class DeliveryEnqueuer {
  constructor(
    private readonly db: Knex,
    private readonly store: EventStore,
    private readonly queue: Queue<DeliveryJob>,
    private readonly logger: Logger,
    private readonly metrics?: FollowerMetrics,
    private readonly name = DELIVERY_ENQUEUER,
  ) {}

  run(signal: AbortSignal): Promise<void> {
    return runLogEnqueuer({ db: this.db, store: this.store, queue: this.queue, logger: this.logger, metrics: this.metrics }, {
      name: this.name, types: ENQUEUED_TYPES, omitData: MESSAGE_CONTENT_FIELDS, jobsOf: (events) => jobsFor(events, new Date()),
    }, signal);
  }
}
