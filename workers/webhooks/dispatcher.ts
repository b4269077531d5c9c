import type { Knex } from 'knex';
import type { Queue } from 'bullmq';
import { streamName, type EventStore, type EventData, type GlobalPosition, type RecordedEvent } from '../../domain/eventStore';
import {
  MESSAGE_CONTENT_FIELDS, asDomainEvent, toEventData,
  type MessageAccepted, type WebhookDeliveryQueued, type WebhookEventName,
} from '../../domain/events';
import { deliveryIdOf, messageEventPayload, webhookEventOf, type MessageFacts } from '../../domain/webhooks/webhooks';
import { followLogAlone, type FollowerMetrics } from '../../infra/eventstore/followerLease';
import { withSetupLock } from '../../infra/db';
import type { Logger } from '../../infra/logger';
import { CheckpointWriter } from '../logEnqueuer';
import { WEBHOOK_DISPATCHER } from '../followers';
import type { WebhookJob } from './worker';

/**
 * Decides which endpoint gets which event (docs/WEBHOOKS.md "How an event reaches an endpoint"),
 * from the log alone:
 *
 *   1. an outcome event of a message (DeliveryStarted on the first attempt, DeliverySucceeded, ...)
 *      becomes one WebhookDeliveryQueued per endpoint of the message's block subscribed to it,
 *      appended to `webhookDelivery-<id>` with a stable id (endpoint + source event): a replay
 *      appends nothing new;
 *   2. every WebhookDeliveryQueued (these, and those of POST .../test) becomes a BullMQ job whose
 *      id is the delivery id: a replay adds nothing twice.
 *
 * To know an outcome's block it keeps, for blocks with endpoints, message id → block (from
 * MessageAccepted) and the endpoints themselves, in its own tables, written in one transaction
 * with its checkpoint. A crash before that commit replays the batch; both steps above are
 * idempotent, so it costs nothing but time. An endpoint hears of the messages accepted after it was
 * created.
 *
 * From a block's MotorBlockDeletionRequested on (in log order) it queues nothing more for the
 * block: its endpoints are dropped, an endpoint created for it later is ignored, and the block
 * joins a set kept with the endpoints (a restart remembers it). The deletion job waits until this
 * follower's checkpoint is past that event before it looks for the block's `webhookDelivery-*`
 * streams (workers/blockDeletion.ts), so none is appended after it looked.
 */

export const WEBHOOK_DISPATCH_SCHEMA = 'motor_webhook_dispatch';
/** The dispatcher's name, and so its lease and its row in motor_workers.checkpoints. */
export { WEBHOOK_DISPATCHER };
const TYPES = [
  'WebhookCreated', 'WebhookUpdated', 'WebhookEndpointDisabled', 'WebhookDeleted', 'MotorBlockDeletionRequested', 'MotorBlockDeleted', 'MessageAccepted',
  'DeliveryStarted', 'DeliverySucceeded', 'DeliveryDeferred', 'DeliveryBounced', 'DeliveryFailed', 'ComplaintReceived',
  'WebhookDeliveryQueued',
] as const;
/** Message → block rows are kept this long (complaints can come days after delivery). */
const MESSAGE_MEMORY_DAYS = 45;

export async function initWebhookDispatchSchema(db: Knex): Promise<void> {
  await withSetupLock(db, WEBHOOK_DISPATCH_SCHEMA, async (trx) => {
    await trx.raw(`CREATE SCHEMA IF NOT EXISTS ${WEBHOOK_DISPATCH_SCHEMA}`);
    await trx.raw(`CREATE TABLE IF NOT EXISTS ${WEBHOOK_DISPATCH_SCHEMA}.targets (
      webhook_id uuid PRIMARY KEY, motor_block_id uuid NOT NULL, events text[] NOT NULL, enabled boolean NOT NULL)`);
    await trx.raw(`CREATE TABLE IF NOT EXISTS ${WEBHOOK_DISPATCH_SCHEMA}.messages (
      message_id uuid PRIMARY KEY, motor_block_id uuid NOT NULL, smtp_message_id text NOT NULL, metadata jsonb NOT NULL, accepted_at timestamptz NOT NULL)`);
    await trx.raw(`CREATE INDEX IF NOT EXISTS messages_accepted_at ON ${WEBHOOK_DISPATCH_SCHEMA}.messages (accepted_at)`);
    // Blocks whose deletion was requested: nothing more is queued for them.
    await trx.raw(`CREATE TABLE IF NOT EXISTS ${WEBHOOK_DISPATCH_SCHEMA}.deleting_blocks (motor_block_id uuid PRIMARY KEY)`);
  });
}

interface Target { webhookId: string; motorBlockId: string; events: WebhookEventName[]; enabled: boolean }

export interface DispatcherOptions {
  /** Attempts and backoff each job gets (the worker's retry schedule). */
  jobOptions: { attempts: number };
  name?: string;
  batchSize?: number;
  /** Starts a batch at most this often under traffic (followLog's minBatchIntervalMs). Default DISPATCH_INTERVAL_MS. */
  minBatchIntervalMs?: number;
  /** motor_log_follower_leader (infra/eventstore/followerLease.ts). */
  metrics?: FollowerMetrics;
}

/**
 * The dispatcher's batch interval: read back to back, it took every NOTIFY of a busy log (each
 * append of the delivery workers) as a read of a few events; a webhook waits at most this much more.
 */
export const DISPATCH_INTERVAL_MS = 50;

export class WebhookDispatcher {
  private targets = new Map<string, Target>();
  private deleting = new Set<string>();
  /** targets by block, rebuilt after a change (outcome events look it up; endpoints change rarely). */
  private byBlock: Map<string, Target[]> | null = null;
  private lastPrune = 0;
  private checkpoint!: CheckpointWriter;

  constructor(
    private readonly db: Knex,
    private readonly store: EventStore,
    private readonly queue: Queue<WebhookJob>,
    private readonly logger: Logger,
    private readonly options: DispatcherOptions,
  ) {}

  private get name(): string { return this.options.name ?? WEBHOOK_DISPATCHER; }

  async run(signal: AbortSignal): Promise<void> {
    this.checkpoint = new CheckpointWriter(this.db, this.name, this.logger);
    // One process at a time (infra/eventstore/followerLease.ts).
    await followLogAlone({ db: this.db, store: this.store, logger: this.logger, metrics: this.options.metrics }, {
      name: this.name,
      types: TYPES,
      omitData: MESSAGE_CONTENT_FIELDS,
      batchSize: this.options.batchSize,
      minBatchIntervalMs: this.options.minBatchIntervalMs ?? DISPATCH_INTERVAL_MS,
      // Endpoints, blocks being deleted and checkpoint are written together: reloaded together on every (re)start.
      start: async () => {
        const rows = await this.db.withSchema(WEBHOOK_DISPATCH_SCHEMA).table('targets').select('*');
        this.targets = new Map(rows.map((r) => [r.webhook_id, { webhookId: r.webhook_id, motorBlockId: r.motor_block_id, events: r.events, enabled: r.enabled }]));
        const deleting = await this.db.withSchema(WEBHOOK_DISPATCH_SCHEMA).table('deleting_blocks').select('motor_block_id');
        this.deleting = new Set(deleting.map((r) => r.motor_block_id as string));
        this.byBlock = null;
        return this.checkpoint.restart();
      },
      handle: (batch) => this.handle(batch.events, batch.position),
      stopped: () => this.checkpoint.flush(),
    }, signal);
  }

  private targetsOf(motorBlockId: string): Target[] {
    if (this.byBlock === null) {
      this.byBlock = new Map();
      for (const t of this.targets.values()) this.byBlock.set(t.motorBlockId, [...(this.byBlock.get(t.motorBlockId) ?? []), t]);
    }
    return this.byBlock.get(motorBlockId) ?? [];
  }

  private dropTargetsOf(motorBlockId: string, changed: Set<string>): void {
    for (const t of this.targetsOf(motorBlockId)) {
      this.targets.delete(t.webhookId);
      changed.add(t.webhookId);
    }
    this.byBlock = null;
  }

  private async handle(events: RecordedEvent[], position: GlobalPosition): Promise<void> {
    // Without any endpoint, before or created in this batch, no outcome can be for one: no need to look its message up.
    const mayMatch = this.targets.size > 0 || events.some((e) => e.type === 'WebhookCreated');
    const known = mayMatch ? await this.knownMessages(events) : new Map<string, MessageFacts>();
    const newMessages: Array<MessageFacts & { acceptedAt: string }> = [];
    const changedTargets = new Set<string>();
    const newlyDeleting = new Set<string>();
    const queued: WebhookDeliveryQueued[] = [];
    const jobs: { name: string; data: WebhookJob; opts: { jobId: string; attempts: number; backoff: { type: 'webhook' } } }[] = [];

    for (const e of events) {
      const event = asDomainEvent(e);
      if (!event) continue;
      switch (event.type) {
        case 'WebhookCreated': {
          const d = event.data;
          if (this.deleting.has(d.motorBlockId)) break;
          this.targets.set(d.webhookId, { webhookId: d.webhookId, motorBlockId: d.motorBlockId, events: d.events, enabled: true });
          changedTargets.add(d.webhookId);
          this.byBlock = null;
          break;
        }
        case 'WebhookUpdated': {
          const t = this.targets.get(event.data.webhookId);
          if (t) Object.assign(t, { events: event.data.events, enabled: event.data.enabled });
          changedTargets.add(event.data.webhookId);
          break;
        }
        case 'WebhookEndpointDisabled': {
          // Paused by the worker (its deliveries kept failing): as a PUT `enabled: false`.
          const t = this.targets.get(event.data.webhookId);
          if (t) t.enabled = false;
          changedTargets.add(event.data.webhookId);
          break;
        }
        case 'WebhookDeleted':
          this.targets.delete(event.data.webhookId);
          changedTargets.add(event.data.webhookId);
          this.byBlock = null;
          break;
        case 'MotorBlockDeletionRequested':
          if (!this.deleting.has(event.data.motorBlockId)) newlyDeleting.add(event.data.motorBlockId);
          this.deleting.add(event.data.motorBlockId);
          // From the request on the block's endpoints are gone, as after the tombstone.
          this.dropTargetsOf(event.data.motorBlockId, changedTargets);
          break;
        case 'MotorBlockDeleted':
          this.dropTargetsOf(event.data.motorBlockId, changedTargets);
          break;
        case 'MessageAccepted': {
          const d = event.data as MessageAccepted;
          if (this.targetsOf(d.motorBlockId).length === 0) break;
          const facts = { messageId: d.messageId, motorBlockId: d.motorBlockId, smtpMessageId: d.smtpMessageId, metadata: d.metadata ?? {} };
          known.set(d.messageId, facts);
          newMessages.push({ ...facts, acceptedAt: d.acceptedAt });
          break;
        }
        case 'WebhookDeliveryQueued': {
          const d = event.data;
          // Its block is being deleted: the worker would drop the job, and the stream goes with the history.
          if (this.deleting.has(d.motorBlockId)) break;
          jobs.push({
            name: 'webhook',
            data: { deliveryId: d.deliveryId, webhookId: d.webhookId, motorBlockId: d.motorBlockId, event: d.event, payload: d.payload },
            opts: { jobId: d.deliveryId, attempts: this.options.jobOptions.attempts, backoff: { type: 'webhook' } },
          });
          break;
        }
        default: {
          const name = webhookEventOf(event);
          const message = name ? known.get((event.data as { messageId: string }).messageId) : undefined;
          if (!name || !message) break;
          for (const t of this.targetsOf(message.motorBlockId)) {
            if (!t.enabled || !t.events.includes(name)) continue;
            const deliveryId = deliveryIdOf(t.webhookId, e.id);
            queued.push({
              deliveryId, webhookId: t.webhookId, motorBlockId: message.motorBlockId, event: name, messageId: message.messageId,
              payload: messageEventPayload(deliveryId, name, event, message), queuedAt: e.createdAt.toISOString(),
            });
          }
        }
      }
    }

    // The event id is the delivery id: appending it again (a replayed batch) is a no-op.
    await Promise.all(queued.map((q) => this.store.append(streamName('webhookDelivery', q.deliveryId), [
      toEventData(q.deliveryId, { type: 'WebhookDeliveryQueued', data: q }, { actor: 'worker:webhook-dispatcher' }) as EventData,
    ], { expectedRevision: 'any' })));
    if (jobs.length > 0) await this.queue.addBulk(jobs);
    const prune = Date.now() - this.lastPrune > 3600_000;
    // A batch that changed none of the tables below (no endpoint anywhere, say) only moves the
    // position, which may wait (CheckpointWriter): replayed after a restart it changes nothing either.
    if (changedTargets.size === 0 && newMessages.length === 0 && newlyDeleting.size === 0 && !prune) {
      await this.checkpoint.save(position);
      return;
    }
    await this.checkpoint.drain();
    await this.db.transaction(async (trx) => {
      const s = () => trx.withSchema(WEBHOOK_DISPATCH_SCHEMA);
      for (const id of changedTargets) {
        const t = this.targets.get(id);
        if (!t) await s().table('targets').where({ webhook_id: id }).delete();
        else await s().table('targets').insert({ webhook_id: id, motor_block_id: t.motorBlockId, events: t.events, enabled: t.enabled }).onConflict('webhook_id').merge();
      }
      if (newMessages.length > 0) {
        await s().table('messages').insert(newMessages.map((m) => ({
          message_id: m.messageId, motor_block_id: m.motorBlockId, smtp_message_id: m.smtpMessageId, metadata: JSON.stringify(m.metadata), accepted_at: m.acceptedAt,
        }))).onConflict('message_id').ignore();
      }
      if (newlyDeleting.size > 0) {
        await s().table('deleting_blocks').insert([...newlyDeleting].map((id) => ({ motor_block_id: id }))).onConflict('motor_block_id').ignore();
        // What it remembered of the block's messages (metadata included) is of no use any more;
        // after the inserts above, which may hold some of its messages accepted earlier in this batch.
        await s().table('messages').whereIn('motor_block_id', [...newlyDeleting]).delete();
      }
      if (prune) {
        this.lastPrune = Date.now();
        await s().table('messages').where('accepted_at', '<', new Date(Date.now() - MESSAGE_MEMORY_DAYS * 86400_000)).delete();
      }
      await this.checkpoint.write(trx, position);
    });
  }

  /** message id → facts for the outcome events of the batch whose message was accepted earlier. */
  private async knownMessages(events: RecordedEvent[]): Promise<Map<string, MessageFacts>> {
    const ids = new Set<string>();
    for (const e of events) {
      if (e.type.startsWith('Delivery') || e.type === 'ComplaintReceived') ids.add((e.data as { messageId: string }).messageId);
    }
    const known = new Map<string, MessageFacts>();
    if (ids.size === 0 || this.targets.size === 0) return known;
    const rows = await this.db.withSchema(WEBHOOK_DISPATCH_SCHEMA).table('messages').whereIn('message_id', [...ids]).select('*');
    for (const r of rows) known.set(r.message_id, { messageId: r.message_id, motorBlockId: r.motor_block_id, smtpMessageId: r.smtp_message_id, metadata: r.metadata });
    return known;
  }
}
