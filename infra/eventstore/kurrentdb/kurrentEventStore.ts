import {
  BACKWARDS,
  END,
  ErrorType,
  eventTypeFilter,
  KurrentDBClient,
  START,
  WrongExpectedVersionError,
  excludeSystemEvents,
  isCommandError,
  jsonEvent,
  type AllStreamResolvedEvent,
  type AllStreamSubscription,
  type JSONType,
  type Position,
  type ResolvedEvent,
} from '@kurrent/kurrentdb-client';
import {
  assertStorable,
  EventStoreUnavailableError,
  WrongExpectedRevisionError,
  type AppendResult,
  type EventData,
  type EventMetadata,
  type EventStore,
  type ExpectedRevision,
  type GlobalPosition,
  type LogBatch,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type SubscribeOptions,
} from '../../../domain/eventStore.js';

/**
 * How our fields travel in KurrentDB's event metadata (KurrentDB has no schema version field).
 * `$correlationId` / `$causationId` are copied so the server's $by_correlation_id projection works.
 */
interface StoredMetadata {
  version: number;
  metadata: EventMetadata;
  $correlationId?: string;
  $causationId?: string;
}

const UNAVAILABLE = new Set<string>([ErrorType.UNAVAILABLE, ErrorType.DEADLINE_EXCEEDED, ErrorType.TIMEOUT, ErrorType.NOT_LEADER]);

/**
 * The event store on KurrentDB / EventStoreDB (selected by EVENTSTORE_URL, `kurrentdb://` or
 * `esdb://`). Positions are `<commit>:<prepare>` of the $all stream. System events ($-prefixed
 * types) are left out of readAll and subscribeToAll.
 */
export class KurrentEventStore implements EventStore {
  private readonly client: KurrentDBClient;
  private readonly subscriptions = new Set<AllStreamSubscription>();
  private closed = false;

  constructor(connectionString: string) {
    this.client = KurrentDBClient.connectionString(connectionString);
  }

  /** Nothing to create (streams appear on first write); checks the server answers. */
  async init(): Promise<void> {
    await this.ping();
  }

  async append(streamId: string, events: EventData[], options: { expectedRevision?: ExpectedRevision } = {}): Promise<AppendResult> {
    if (events.length === 0) throw new TypeError('append needs at least one event');
    assertStorable(streamId, events);
    const expected = options.expectedRevision ?? 'any';
    try {
      const result = await this.client.appendToStream(streamId, events.map(toEventData), { streamState: expected });
      const position = result.position ?? (await this.lastPosition(streamId));
      return { nextExpectedRevision: result.nextExpectedRevision, position: formatPosition(position) };
    } catch (err) {
      if (err instanceof WrongExpectedVersionError) throw new WrongExpectedRevisionError(streamId, expected, err.actualState);
      throw toStoreError(err);
    }
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const out: RecordedEvent[] = [];
    try {
      const read = this.client.readStream(streamId, {
        fromRevision: options.fromRevision ?? START,
        ...(options.maxCount === undefined ? {} : { maxCount: options.maxCount }),
      });
      for await (const resolved of read) {
        const e = toRecorded(resolved);
        if (e) out.push(e);
      }
    } catch (err) {
      if (err instanceof Error && isCommandError(err) && (err.type === ErrorType.STREAM_NOT_FOUND || err.type === ErrorType.STREAM_DELETED)) return [];
      throw toStoreError(err);
    }
    return out;
  }

  async readAll(options: ReadAllOptions): Promise<RecordedEvent[]> {
    const after = options.after ? parsePosition(options.after) : null;
    const out: RecordedEvent[] = [];
    try {
      // A read from a position includes the event at that position: ask one more and drop it.
      const read = this.client.readAll({
        fromPosition: after ?? START,
        maxCount: options.maxCount + (after ? 1 : 0),
        filter: excludeSystemEvents(),
      });
      for await (const resolved of read) {
        const e = toRecorded(resolved);
        if (!e || (after && comparePositions(parsePosition(e.position), after) <= 0)) continue;
        out.push(e);
        if (out.length === options.maxCount) break;
      }
    } catch (err) {
      throw toStoreError(err);
    }
    return out;
  }

  async *subscribeToAll(options: SubscribeOptions): AsyncIterable<LogBatch> {
    const { signal } = options;
    const batchSize = options.batchSize ?? 500;
    const after = options.after ? parsePosition(options.after) : null;
    if (signal.aborted || this.closed) return;
    // A type filter runs on the server; the checkpoints it reports while skipping other events are
    // handed over with the next batch (or alone, as a position-only batch, once nothing is buffered).
    let checkpoint: Position | null = null;
    const filter = options.types
      ? eventTypeFilter({
          regex: `^(${options.types.map(escapeRegex).join('|')})$`,
          checkpointInterval: 1,
          checkpointReached: (_sub, position) => { checkpoint = position; },
        })
      : excludeSystemEvents();
    // The server pushes events (catch-up, then live); its subscriptions start after fromPosition.
    const subscription = this.client.subscribeToAll({ fromPosition: after ?? START, filter });
    this.subscriptions.add(subscription);
    const stop = (): void => void subscription.unsubscribe().catch(() => undefined);
    signal.addEventListener('abort', stop);
    let batch: RecordedEvent[] = [];
    const later = (a: Position | null, b: Position | null): Position | null => (!a ? b : !b ? a : comparePositions(a, b) >= 0 ? a : b);
    try {
      for await (const resolved of subscription) {
        const e = toRecorded(resolved, options.omitData);
        if (e && !(after && comparePositions(parsePosition(e.position), after) <= 0)) batch.push(e);
        // Hand over what has arrived as soon as nothing more is buffered.
        if (batch.length >= batchSize || (batch.length > 0 && subscription.readableLength === 0)) {
          const last = parsePosition(batch[batch.length - 1].position);
          const position = checkpoint && comparePositions(checkpoint, last) > 0 && subscription.readableLength === 0 ? checkpoint : last;
          yield { events: batch, position: formatPosition(position), more: subscription.readableLength > 0 };
          batch = [];
          checkpoint = null;
        } else if (batch.length === 0 && checkpoint && subscription.readableLength === 0) {
          const position = later(checkpoint, after);
          checkpoint = null;
          if (position) yield { events: [], position: formatPosition(position) };
        }
        if (signal.aborted || this.closed) break;
      }
    } catch (err) {
      if (!signal.aborted && !this.closed) throw toStoreError(err);
    } finally {
      signal.removeEventListener('abort', stop);
      this.subscriptions.delete(subscription);
      stop();
    }
  }

  /**
   * Soft-deletes each stream (KurrentDB deleteStream): reads of the stream return nothing and a
   * new append starts it again, but the events stay in $all, and on disk, until the next
   * scavenge. Not a tombstone, so the stream name stays usable.
   */
  async deleteStreams(streamIds: string[]): Promise<void> {
    try {
      for (const streamId of streamIds) await this.client.deleteStream(streamId);
    } catch (err) {
      throw toStoreError(err);
    }
  }

  /** `<commit>:<prepare>`, both numbers a position holds (unsigned 64 bits): more cannot be sent to the server. */
  isPosition(value: string): boolean {
    const m = /^(\d{1,20}):(\d{1,20})$/.exec(value);
    return m !== null && BigInt(m[1]) <= UINT64_MAX && BigInt(m[2]) <= UINT64_MAX;
  }

  comparePositions(a: GlobalPosition, b: GlobalPosition): number {
    return comparePositions(parsePosition(a), parsePosition(b));
  }

  /** The last event of $all (system events included: any of them is at or after every position handed out). */
  async headPosition(options: { types?: readonly string[] } = {}): Promise<GlobalPosition | null> {
    const filter = options.types ? eventTypeFilter({ regex: `^(${options.types.map(escapeRegex).join('|')})$` }) : undefined;
    try {
      for await (const resolved of this.client.readAll({ fromPosition: END, direction: BACKWARDS, maxCount: 1, ...(filter ? { filter } : {}) })) {
        if (resolved.event?.position) return formatPosition(resolved.event.position);
      }
    } catch (err) {
      throw toStoreError(err);
    }
    return null;
  }

  async ping(): Promise<void> {
    await this.readStream('motorPing-liveness', { maxCount: 1 });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.unsubscribe().catch(() => undefined)));
    await this.client.dispose();
  }

  /** Position of a stream's last event (servers that do not report it in the append result). */
  private async lastPosition(streamId: string): Promise<Position> {
    for await (const resolved of this.client.readStream(streamId, { fromRevision: END, direction: BACKWARDS, maxCount: 1 })) {
      if (resolved.event?.position) return resolved.event.position;
    }
    throw new EventStoreUnavailableError(`KurrentDB did not report the position of ${streamId}`);
  }
}

function toEventData(e: EventData) {
  const stored: StoredMetadata = { version: e.version, metadata: e.metadata ?? {} };
  if (typeof e.metadata?.correlationId === 'string') stored.$correlationId = e.metadata.correlationId;
  if (typeof e.metadata?.causationId === 'string') stored.$causationId = e.metadata.causationId;
  return jsonEvent({ id: e.id, type: e.type, data: e.data as JSONType, metadata: stored as unknown as JSONType });
}

/** `omit`: top-level data keys to leave out (the server sends them anyway; the contract is the same). */
function toRecorded(resolved: ResolvedEvent | AllStreamResolvedEvent, omit?: readonly string[]): RecordedEvent | null {
  const e = resolved.event;
  if (!e || !e.isJson || !e.position) return null;
  const stored = (e.metadata ?? {}) as Partial<StoredMetadata>;
  let data: unknown = e.data;
  if (omit && omit.length > 0 && data !== null && typeof data === 'object' && !Array.isArray(data)) {
    const kept: Record<string, unknown> = { ...(data as Record<string, unknown>) };
    for (const key of omit) delete kept[key];
    data = kept;
  }
  return {
    id: e.id,
    type: e.type,
    version: typeof stored.version === 'number' ? stored.version : 1,
    data,
    metadata: stored.metadata ?? {},
    streamId: e.streamId,
    revision: e.revision,
    position: formatPosition(e.position),
    createdAt: e.created,
  };
}

const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const formatPosition = (p: Position): GlobalPosition => `${p.commit}:${p.prepare}`;

const UINT64_MAX = 2n ** 64n - 1n;

function parsePosition(position: GlobalPosition): Position {
  const m = /^(\d+):(\d+)$/.exec(position);
  if (!m) throw new TypeError(`Not a KurrentDB position: ${position}`);
  return { commit: BigInt(m[1]), prepare: BigInt(m[2]) };
}

function comparePositions(a: Position, b: Position): number {
  if (a.commit !== b.commit) return a.commit < b.commit ? -1 : 1;
  return a.prepare === b.prepare ? 0 : a.prepare < b.prepare ? -1 : 1;
}

function toStoreError(err: unknown): unknown {
  if (err instanceof Error && isCommandError(err) && UNAVAILABLE.has(err.type)) {
    return new EventStoreUnavailableError(`KurrentDB event store unavailable: ${err.message}`, err);
  }
  return err;
}
