import type { Knex } from 'knex';
import type { Queue } from 'bullmq';
import type { EventStore, GlobalPosition, RecordedEvent } from '../domain/eventStore';
import { MESSAGE_CONTENT_FIELDS, type DeliveryDeferred, type MessageAccepted } from '../domain/events';
import type { Logger } from '../infra/logger';
import { jobIdFor, type DeliveryJob } from './queue';

/**
 * Feeds the delivery queue from the event log, never from the request path: a MessageAccepted
 * becomes a delivery job, a DeliveryDeferred a delayed retry job. The checkpoint is saved after
 * the jobs are added, so a crash re-adds some jobs, which BullMQ ignores (stable job ids).
 */

const SCHEMA = 'motor_workers';
/** The only events the enqueuer is sent (the store skips the rest). */
const ENQUEUED_TYPES = ['MessageAccepted', 'DeliveryDeferred'] as const;

export async function initEnqueuerSchema(db: Knex): Promise<void> {
  await db.raw(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
  await db.raw(`CREATE TABLE IF NOT EXISTS ${SCHEMA}.checkpoints (name text PRIMARY KEY, position text, updated_at timestamptz NOT NULL DEFAULT now())`);
}

export function jobsFor(events: RecordedEvent[], now: Date): { name: string; data: DeliveryJob; opts: { jobId: string; delay?: number } }[] {
  const jobs = [];
  for (const e of events) {
    if (e.type === 'MessageAccepted') {
      const { messageId } = e.data as MessageAccepted;
      jobs.push({ name: 'deliver', data: { messageId }, opts: { jobId: jobIdFor(messageId) } });
    } else if (e.type === 'DeliveryDeferred') {
      const d = e.data as DeliveryDeferred;
      const delay = Math.max(0, Date.parse(d.nextAttemptAt) - now.getTime());
      jobs.push({ name: 'deliver', data: { messageId: d.messageId }, opts: { jobId: jobIdFor(d.messageId, d.attempt), delay } });
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
    private readonly name = 'delivery-enqueuer',
  ) {}

  private async checkpoint(): Promise<GlobalPosition | null> {
    const row = await this.db.withSchema(SCHEMA).table('checkpoints').where({ name: this.name }).first('position');
    return row?.position ?? null;
  }

  private async save(position: GlobalPosition): Promise<void> {
    await this.db.withSchema(SCHEMA).table('checkpoints')
      .insert({ name: this.name, position, updated_at: this.db.fn.now() })
      .onConflict('name').merge();
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const after = await this.checkpoint();
        for await (const batch of this.store.subscribeToAll({ after, batchSize: 500, signal, types: ENQUEUED_TYPES, omitData: MESSAGE_CONTENT_FIELDS })) {
          const jobs = jobsFor(batch.events, new Date());
          if (jobs.length > 0) await this.queue.addBulk(jobs);
          await this.save(batch.position);
        }
      } catch (err) {
        if (signal.aborted) return;
        this.logger.error({ err }, 'delivery enqueuer failed; retrying');
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }
}
