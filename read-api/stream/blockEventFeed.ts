import type { Knex } from 'knex';
import type { EventStore, GlobalPosition, RecordedEvent } from '../../domain/eventStore';
import { MESSAGE_CONTENT_FIELDS, asDomainEvent, type MessageAccepted } from '../../domain/events';
import type { Logger } from '../../infra/logger';
import { MESSAGES_SCHEMA } from '../../projections/messages/queries';

/**
 * The live feed behind `GET .../events/stream` (docs/EVENTS.md): ONE subscription to the log per
 * API process, however many clients listen, fanned out to the listeners of each block. It runs
 * only while someone listens. It starts where the messages projection is (a few hundred ms behind
 * the head at most) and each listener gets the events created from the moment it connected.
 *
 * Outcome events do not name their block: the feed learns message → block from the MessageAccepted
 * events it reads, and asks the messages read model for messages accepted before it started.
 */

export type StreamStatus = 'queued' | 'processed' | 'deferred' | 'delivered' | 'bounced' | 'failed' | 'complained';

export interface StreamMessageEvent {
  /** The log position: the SSE event id. */
  position: GlobalPosition;
  motorBlockId: string;
  messageId: string;
  status: StreamStatus;
  recipient: string;
  timestamp: string;
  smtpCode?: string | null;
  smtpResponse?: string | null;
  attempt?: number;
  nextAttemptAt?: string;
  reason?: string;
  createdAt: Date;
}

type Listener = (events: StreamMessageEvent[]) => void;

const TYPES = ['MessageAccepted', 'DeliveryStarted', 'DeliverySucceeded', 'DeliveryDeferred', 'DeliveryBounced', 'DeliveryFailed', 'ComplaintReceived'] as const;
const STATUS: Record<string, StreamStatus> = {
  DeliveryStarted: 'processed', DeliverySucceeded: 'delivered', DeliveryDeferred: 'deferred',
  DeliveryBounced: 'bounced', DeliveryFailed: 'failed', ComplaintReceived: 'complained',
};
/** message → block entries kept in memory (oldest dropped first). */
const MAX_KNOWN = 200_000;

export class BlockEventFeed {
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly blockOf = new Map<string, string>();
  private abort: AbortController | null = null;

  constructor(private readonly db: Knex, private readonly store: EventStore, private readonly logger: Logger) {}

  /** Listens to one block's events; returns the function that stops listening. */
  listen(motorBlockId: string, listener: Listener): () => void {
    let set = this.listeners.get(motorBlockId);
    if (!set) this.listeners.set(motorBlockId, (set = new Set()));
    set.add(listener);
    if (!this.abort) this.start();
    return () => {
      set!.delete(listener);
      if (set!.size === 0) this.listeners.delete(motorBlockId);
      if (this.listeners.size === 0) this.stop();
    };
  }

  /** Ends the subscription (shutdown); listeners stay registered but hear nothing more. */
  stop(): void {
    this.abort?.abort();
    this.abort = null;
  }

  private start(): void {
    const abort = new AbortController();
    this.abort = abort;
    void this.run(abort.signal);
  }

  private async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const row = await this.db.withSchema(MESSAGES_SCHEMA).table('projection_checkpoint').where({ id: 1 }).first('position') as { position: string | null } | undefined;
        for await (const batch of this.store.subscribeToAll({ after: row?.position ?? null, batchSize: 1000, signal, types: TYPES, omitData: MESSAGE_CONTENT_FIELDS })) {
          await this.dispatch(batch.events);
        }
      } catch (err) {
        if (signal.aborted) return;
        this.logger.warn({ err }, 'event stream feed failed; retrying');
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  private remember(messageId: string, motorBlockId: string): void {
    if (this.blockOf.size >= MAX_KNOWN) this.blockOf.delete(this.blockOf.keys().next().value as string);
    this.blockOf.set(messageId, motorBlockId);
  }

  private async dispatch(events: RecordedEvent[]): Promise<void> {
    const unknown = new Set<string>();
    for (const e of events) {
      if (e.type === 'MessageAccepted') this.remember((e.data as MessageAccepted).messageId, (e.data as MessageAccepted).motorBlockId);
      else {
        const id = (e.data as { messageId: string }).messageId;
        if (!this.blockOf.has(id)) unknown.add(id);
      }
    }
    if (unknown.size > 0) {
      const rows = await this.db.withSchema(MESSAGES_SCHEMA).table('messages').whereIn('id', [...unknown]).select('id', 'motor_block_id') as Array<{ id: string; motor_block_id: string }>;
      for (const r of rows) this.remember(r.id, r.motor_block_id);
    }
    const byBlock = new Map<string, StreamMessageEvent[]>();
    for (const e of events) {
      for (const m of this.toStreamEvents(e)) {
        if (!this.listeners.has(m.motorBlockId)) continue;
        let list = byBlock.get(m.motorBlockId);
        if (!list) byBlock.set(m.motorBlockId, (list = []));
        list.push(m);
      }
    }
    for (const [block, list] of byBlock) {
      for (const listener of this.listeners.get(block) ?? []) listener(list);
    }
  }

  private toStreamEvents(e: RecordedEvent): StreamMessageEvent[] {
    const event = asDomainEvent(e);
    if (!event) return [];
    const base = { position: e.position, createdAt: e.createdAt };
    if (event.type === 'MessageAccepted') {
      const d = event.data;
      return d.to.map((recipient) => ({ ...base, motorBlockId: d.motorBlockId, messageId: d.messageId, status: 'queued' as const, recipient, timestamp: d.acceptedAt }));
    }
    const status = STATUS[event.type];
    const d = event.data as unknown as { messageId: string; recipient: string; at: string; smtpCode?: string | null; smtpResponse?: string | null; attempt?: number; nextAttemptAt?: string; reason?: string };
    const motorBlockId = this.blockOf.get(d.messageId);
    if (!status || !motorBlockId) return [];
    const out: StreamMessageEvent = { ...base, motorBlockId, messageId: d.messageId, status, recipient: d.recipient, timestamp: d.at };
    if (d.attempt !== undefined) out.attempt = d.attempt;
    if ('smtpCode' in d) {
      out.smtpCode = d.smtpCode ?? null;
      out.smtpResponse = d.smtpResponse ?? null;
    }
    if (d.nextAttemptAt !== undefined) out.nextAttemptAt = d.nextAttemptAt;
    if (d.reason !== undefined) out.reason = d.reason;
    return [out];
  }
}
