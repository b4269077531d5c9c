import type { Knex } from 'knex';
import { streamName, type EventStore, type GlobalPosition, type RecordedEvent } from '../../domain/eventStore';
import { MESSAGE_CONTENT_FIELDS, asDomainEvent, type MessageAccepted } from '../../domain/events';
import { MESSAGE_EVENT_TYPES, recipientOutcomeFacts, type RecipientOutcomeFacts } from '../../domain/message/message';
import { followLog } from '../../infra/eventstore/followLog';
import type { Logger } from '../../infra/logger';
import { MESSAGES_SCHEMA } from '../../projections/messages/queries';

/**
 * The live feed behind `GET .../events/stream` (docs/EVENTS.md): ONE subscription to the log per
 * API process, however many clients listen, fanned out to the listeners of each block. It runs
 * only while someone listens. It starts where the messages projection is (a few hundred ms behind
 * the head at most) and each listener gets the events created from the moment it connected. After
 * a failure (the store's, or its own handling of a batch) it starts again right after the last
 * batch it handed over, so a listener gets each event once.
 *
 * Outcome events do not name their block: the feed learns message → block (and when the message
 * was accepted: the retention window's test) from the MessageAccepted events it reads, and asks the
 * messages read model for messages accepted before it started.
 */

/** One recipient's outcome on the stream (`queued` for each address of a MessageAccepted). */
export type StreamMessageEvent = (RecipientOutcomeFacts | { messageId: string; recipient: string; status: 'queued'; timestamp: string }) & {
  /** The log position of the entry it comes from. */
  position: GlobalPosition;
  /** Its place among the events of that entry (the recipient's, for a MessageAccepted); 0 when it is the only one. */
  index: number;
  /** The SSE event id (streamEventId). */
  id: string;
  motorBlockId: string;
  /** When the event was recorded in the log. */
  createdAt: Date;
  /** When its message was accepted (the time the logs route lists a message by): the retention window's test with createdAt. */
  acceptedAt: Date;
};

/**
 * Where a client is on the stream, from the SSE id it sent back (Last-Event-ID): after the event
 * at `index` of the log entry at `position`, or after the whole entry when `index` is null (an id
 * that is a bare position). Index -1 (never from a client: the start of the retention window,
 * BlockEventFeed.windowStart) is before the entry's first event.
 */
export interface StreamCursor {
  position: GlobalPosition;
  index: number | null;
  /** The message whose MessageAccepted is at `position` (ids with an index): where to read that entry again. */
  messageId?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const INDEX = /^\d{1,6}$/;

/**
 * The SSE id of a stream event (docs/EVENTS.md "Event ids"). The only event of a log entry has the
 * entry's position, as every id had before. The `queued` events of a message to several recipients
 * come from one entry, so each adds the message and its index: `<position>/<messageId>/<index>`.
 * The message id is what lets a resume read that entry again (the first event of its stream): the
 * log can only be read after a position, which would leave out the entry's remaining events.
 */
export function streamEventId(position: GlobalPosition, of?: { messageId: string; index: number }): string {
  return of ? `${position}/${of.messageId}/${of.index}` : position;
}

/** An id a client sent back, read; null when it is not the shape of one of this store's ids. */
export function parseStreamEventId(id: string, store: Pick<EventStore, 'isPosition'>): StreamCursor | null {
  const parts = id.split('/');
  if (!store.isPosition(parts[0])) return null;
  if (parts.length === 1) return { position: parts[0], index: null };
  if (parts.length !== 3 || !UUID.test(parts[1]) || !INDEX.test(parts[2])) return null;
  return { position: parts[0], messageId: parts[1].toLowerCase(), index: Number(parts[2]) };
}

/** True when `e` comes after `cursor` on the stream: a later entry, or a later event of the same entry. */
export function comesAfter(store: Pick<EventStore, 'comparePositions'>, e: StreamMessageEvent, cursor: StreamCursor): boolean {
  const order = store.comparePositions(e.position, cursor.position);
  return order > 0 || (order === 0 && cursor.index !== null && e.index > cursor.index);
}

/** A MessageAccepted's acceptedAt (as the messages projection reads it: the log's time when unreadable). */
function acceptedAtOf(e: RecordedEvent): Date {
  const at = new Date((e.data as Partial<MessageAccepted>).acceptedAt ?? Number.NaN);
  return Number.isNaN(at.getTime()) ? e.createdAt : at;
}

type Listener = (events: StreamMessageEvent[]) => void;

/** message → block entries kept in memory (oldest dropped first). */
const MAX_KNOWN = 200_000;
/**
 * How much earlier than the retention window's start the read model is asked for the block's first
 * message (windowStart): a message stamped a little after another may be appended before it, and
 * the replay must not start after a message of the window. What it reads of the margin is filtered out.
 */
const WINDOW_SEEK_MARGIN_MS = 5 * 60_000;

/** What the feed knows of a message: its block, and when it was accepted (ms). */
interface KnownMessage { block: string; acceptedAt: number }

export class BlockEventFeed {
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly known = new Map<string, KnownMessage>();
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
    // Where this run has handed everything over to its listeners (unset until the first start has
    // read the checkpoint). followLog restarts after a failure: from here, not from the projection's
    // checkpoint, which is then behind (live clients would get events again) or ahead (they would
    // miss the events in between). Not leased (infra/eventstore/followerLease.ts): every API
    // process serves its own clients, from its own feed.
    let reached: { after: GlobalPosition | null } | undefined;
    void followLog(this.store, this.logger, {
      name: 'event stream feed',
      types: MESSAGE_EVENT_TYPES,
      omitData: MESSAGE_CONTENT_FIELDS,
      batchSize: 1000,
      start: async () => {
        if (!reached) reached = { after: await this.checkpoint() };
        return reached.after;
      },
      handle: async (batch) => {
        await this.dispatch(batch.events, abort.signal);
        reached = { after: batch.position };
      },
    }, abort.signal);
  }

  /** Where the messages projection is: the first start's position. */
  private async checkpoint(): Promise<GlobalPosition | null> {
    const row = await this.db.withSchema(MESSAGES_SCHEMA).table('projection_checkpoint').where({ id: 1 }).first('position') as { position: string | null } | undefined;
    return row?.position ?? null;
  }

  private remember(messageId: string, message: KnownMessage): void {
    if (this.known.size >= MAX_KNOWN) this.known.delete(this.known.keys().next().value as string);
    this.known.set(messageId, message);
  }

  /** Hands a batch of the run of `signal` to the listeners, unless that run was stopped meanwhile. */
  private async dispatch(events: RecordedEvent[], signal: AbortSignal): Promise<void> {
    const resolved = await this.resolve(events, (block) => this.listeners.has(block));
    // Stopped while resolving (every listener left): a listener that came since belongs to a new
    // run, which reads from the checkpoint again and would hand these events to it a second time.
    if (signal.aborted) return;
    const byBlock = new Map<string, StreamMessageEvent[]>();
    for (const m of resolved) {
      let list = byBlock.get(m.motorBlockId);
      if (!list) byBlock.set(m.motorBlockId, (list = []));
      list.push(m);
    }
    for (const [block, list] of byBlock) {
      for (const listener of this.listeners.get(block) ?? []) {
        // One listener's failure stays its own: the others get the batch once, and the feed goes on
        // (failing the batch would restart the feed before it and repeat it to the listeners served).
        try {
          listener(list);
        } catch (err) {
          this.logger.error({ err, motorBlockId: block }, 'event stream listener failed');
        }
      }
    }
  }

  /**
   * Message events of the log → stream events of the blocks `wanted` accepts, in log order (also
   * for a resumed stream's catch-up read, docs/EVENTS.md "Resuming").
   */
  async resolve(events: RecordedEvent[], wanted: (motorBlockId: string) => boolean): Promise<StreamMessageEvent[]> {
    const unknown = new Set<string>();
    for (const e of events) {
      if (e.type === 'MessageAccepted') {
        const d = e.data as MessageAccepted;
        this.remember(d.messageId, { block: d.motorBlockId, acceptedAt: acceptedAtOf(e).getTime() });
      } else {
        const id = (e.data as { messageId: string }).messageId;
        if (!this.known.has(id)) unknown.add(id);
      }
    }
    if (unknown.size > 0) {
      const rows = await this.db.withSchema(MESSAGES_SCHEMA).table('messages').whereIn('id', [...unknown])
        .select('id', 'motor_block_id', 'queued_at') as Array<{ id: string; motor_block_id: string; queued_at: Date }>;
      for (const r of rows) this.remember(r.id, { block: r.motor_block_id, acceptedAt: r.queued_at.getTime() });
    }
    return events.flatMap((e) => this.toStreamEvents(e)).filter((m) => wanted(m.motorBlockId));
  }

  /**
   * The stream events of the block that come after `cursor` within its own log entry (a resume
   * after one of a message's `queued` events: the entry's later ones). Read from the message's
   * stream, whose first event is its MessageAccepted; none when that is not the entry at the
   * cursor's position (an id made up, or of a forgotten block), and the resume goes on after the
   * whole entry.
   */
  async restOfEntry(cursor: StreamCursor, motorBlockId: string): Promise<StreamMessageEvent[]> {
    if (cursor.index === null || !cursor.messageId) return [];
    const [accepted] = await this.store.readStream(streamName('message', cursor.messageId), { maxCount: 1 });
    if (accepted?.type !== 'MessageAccepted' || this.store.comparePositions(accepted.position, cursor.position) !== 0) return [];
    return (await this.resolve([accepted], (b) => b === motorBlockId)).filter((e) => e.index > cursor.index!);
  }

  /**
   * Where a resume from before the retention window's start (`since`) goes on (docs/EVENTS.md
   * "Retention"), found without reading the log: just before the MessageAccepted of the block's
   * first message the messages read model shows accepted since (WINDOW_SEEK_MARGIN_MS before it),
   * read from that message's stream; after the projection's checkpoint when the read model has none
   * (every message of the block accepted since then is in the log after it). Null when neither is
   * known (no checkpoint yet, or the message's stream is gone): the replay then reads from the id
   * it was given, its events filtered.
   */
  async windowStart(motorBlockId: string, since: Date): Promise<StreamCursor | null> {
    // The checkpoint first: every message up to it is in the read model by the time it is asked.
    const checkpoint = await this.checkpoint();
    const first = await this.db.withSchema(MESSAGES_SCHEMA).table('messages')
      .where({ motor_block_id: motorBlockId, accepted: true }).andWhere('queued_at', '>=', new Date(since.getTime() - WINDOW_SEEK_MARGIN_MS))
      .orderBy([{ column: 'queued_at', order: 'asc' }, { column: 'id', order: 'asc' }])
      .first('id') as { id: string } | undefined;
    if (first) {
      const [accepted] = await this.store.readStream(streamName('message', first.id), { maxCount: 1 });
      return accepted?.type === 'MessageAccepted' ? { position: accepted.position, index: -1, messageId: first.id } : null;
    }
    return checkpoint === null ? null : { position: checkpoint, index: null };
  }

  /** True when the log entry right after `position` was recorded before `time` (a resume from there starts outside the window). */
  async recordedBefore(position: GlobalPosition, time: Date): Promise<boolean> {
    const at = this.store.countAfter
      ? (await this.store.countAfter({ after: position, maxCount: 1 })).oldestMatching
      : (await this.store.readAll({ after: position, maxCount: 1 }))[0]?.createdAt ?? null;
    return at !== null && at.getTime() < time.getTime();
  }

  private toStreamEvents(e: RecordedEvent): StreamMessageEvent[] {
    const event = asDomainEvent(e);
    if (!event) return [];
    const base = { position: e.position, createdAt: e.createdAt };
    if (event.type === 'MessageAccepted') {
      const d = event.data;
      const acceptedAt = acceptedAtOf(e);
      return d.to.map((recipient, index) => ({
        ...base, acceptedAt, index, id: streamEventId(e.position, d.to.length > 1 ? { messageId: d.messageId, index } : undefined),
        motorBlockId: d.motorBlockId, messageId: d.messageId, status: 'queued' as const, recipient, timestamp: d.acceptedAt,
      }));
    }
    const facts = recipientOutcomeFacts(event);
    const message = facts && this.known.get(facts.messageId);
    return facts && message ? [{ ...base, acceptedAt: new Date(message.acceptedAt), index: 0, id: streamEventId(e.position), motorBlockId: message.block, ...facts }] : [];
  }
}
