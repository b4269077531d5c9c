/**
 * The event store port. Two adapters implement it and pass one contract suite
 * (test/infra/eventstore/contract.ts): PostgreSQL (default, infra/eventstore/postgres) and
 * EventStoreDB/KurrentDB (infra/eventstore/kurrentdb, selected by EVENTSTORE_URL).
 *
 * Streams are named `category-<id>` (message-<uuid>, motorBlock-<uuid>, ...). Revisions are
 * 0-based positions inside a stream, as in EventStoreDB.
 */

import { MAX_EVENT_DEPTH, jsonProblem } from './storableJson';

/** Expected state of a stream for an optimistic-concurrency append. */
export type ExpectedRevision = 'any' | 'no_stream' | 'stream_exists' | bigint;

export interface EventMetadata {
  /** Id of the request or job that caused the event (for tracing). */
  correlationId?: string;
  causationId?: string;
  /** Who did it: `apiKey:<id>`, `cli`, `worker`, ... */
  actor?: string;
  [key: string]: unknown;
}

/** An event to append. `id` makes a retried append harmless: same ids at the same place = success. */
export interface EventData<Type extends string = string, Data = unknown> {
  id: string;
  type: Type;
  /** Schema version of `data` for this type (see domain/events.ts). */
  version: number;
  data: Data;
  metadata?: EventMetadata;
}

/**
 * A position in the global log. Opaque to everything but the adapter that made it: the PostgreSQL
 * adapter encodes `<transactionId>:<globalPosition>`, the KurrentDB adapter `<commit>:<prepare>`.
 * Persist it as a string; never compare two positions outside the adapter.
 */
export type GlobalPosition = string;

export interface RecordedEvent<Type extends string = string, Data = unknown> {
  id: string;
  type: Type;
  version: number;
  data: Data;
  metadata: EventMetadata;
  streamId: string;
  revision: bigint;
  position: GlobalPosition;
  createdAt: Date;
}

export interface AppendResult {
  /** Revision of the last event now in the stream (pass it as the next expectedRevision). */
  nextExpectedRevision: bigint;
  position: GlobalPosition;
}

export interface ReadStreamOptions {
  fromRevision?: bigint;
  maxCount?: number;
}

export interface ReadAllOptions {
  /** Exclusive lower bound; null or undefined = from the beginning of the log. */
  after?: GlobalPosition | null;
  maxCount: number;
}

export interface SubscribeOptions {
  after?: GlobalPosition | null;
  /** Largest batch handed to the consumer at once (with `types`: the most log entries examined per read). */
  batchSize?: number;
  signal: AbortSignal;
  /**
   * Only events of these types are delivered; the store skips the others without sending their
   * data. Omitted = every event.
   */
  types?: readonly string[];
  /**
   * Top-level keys of the events' data that the consumer never reads (MessageAccepted's bodies,
   * say): the store may leave them out of the data it sends, and does for large events (the
   * PostgreSQL store above 2 KB stored, KurrentDB always). The consumer must not read them.
   */
  omitData?: readonly string[];
}

/**
 * One step of a subscription: the events (in log order) and the position to resume after, which
 * is never before the last event's and may be past it when the store skipped events that the
 * subscription's `types` filter left out. With a filter, `events` can be empty: a step that only
 * moves the position (a consumer may persist it as its checkpoint, or wait for a later one).
 */
export interface LogBatch {
  events: RecordedEvent[];
  position: GlobalPosition;
  /**
   * True when the store had more of the log at hand as it handed this batch over (its read window
   * was full, or more events were already buffered), so a consumer that spaces its batches should
   * read on at once. With a type filter the window counts the log entries examined, not the
   * events handed over. Absent when the store cannot tell.
   */
  more?: boolean;
}

export interface EventStore {
  /** Appends atomically or not at all. Throws WrongExpectedRevisionError on a concurrency conflict. */
  append(streamId: string, events: EventData[], options?: { expectedRevision?: ExpectedRevision }): Promise<AppendResult>;
  /** Events of one stream in revision order; [] when the stream does not exist. */
  readStream(streamId: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;
  /**
   * The global log after a position, in a stable total order. Never returns an event while an
   * event that sorts before it may still commit: a consumer that advances its checkpoint to the
   * last event it saw can never skip one.
   */
  readAll(options: ReadAllOptions): Promise<RecordedEvent[]>;
  /**
   * Batches of the global log after `after`, forever (until the signal aborts): catches up, then
   * waits for new events (LISTEN/NOTIFY or a server push, with a polling fallback). Resuming after
   * a batch's `position` continues exactly where that batch ended.
   */
  subscribeToAll(options: SubscribeOptions): AsyncIterable<LogBatch>;
  /**
   * Optional: how far a reader at `after` is behind, without reading any event's data (lag probes
   * of the projector role). Looks at up to `maxCount` log entries after `after`, in readAll's
   * order, and counts those of `types` (all when omitted). Without it, callers use readAll.
   */
  countAfter?(options: CountAfterOptions): Promise<CountAfter>;
  /**
   * Removes every event of the given streams (the "forget" of a deleted block's history).
   * Adapters without physical deletion soft-delete (tombstone/truncate) and document it.
   */
  deleteStreams(streamIds: string[]): Promise<void>;
  /**
   * The position of the last entry in the log now (null when the log is empty): every position
   * this store has handed out is at or before it, so a client's position after it is not one of
   * this log's (another deployment's, or of the log before a rebuild). It may include entries a
   * reader does not see yet (committed in a transaction still held back): an upper bound.
   * With `types`: the position of the last entry of one of those types (null when there is none),
   * what a reader that follows only them must reach to have them all; a projection following a
   * type filter on KurrentDB may never be told of positions past its last event of those types.
   */
  headPosition(options?: { types?: readonly string[] }): Promise<GlobalPosition | null>;
  /** True when `value` has the shape of one of this store's positions (e.g. an id a client sent back). */
  isPosition(value: string): boolean;
  /** Log order of two positions of this store: negative when `a` comes first, 0 when equal. */
  comparePositions(a: GlobalPosition, b: GlobalPosition): number;
  /** Cheap liveness probe for /v1/status and readiness. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface CountAfterOptions { after: GlobalPosition | null; maxCount: number; types?: readonly string[] }
export interface CountAfter {
  /** Log entries looked at (= maxCount when there may be more). */
  examined: number;
  /** Of those, the ones of the asked types. */
  matching: number;
  /** createdAt of the oldest matching entry; null when none matches. */
  oldestMatching: Date | null;
}

export class WrongExpectedRevisionError extends Error {
  constructor(
    readonly streamId: string,
    readonly expected: ExpectedRevision,
    readonly actual: bigint | 'no_stream',
  ) {
    super(`Wrong expected revision on ${streamId}: expected ${String(expected)}, actual ${String(actual)}`);
    this.name = 'WrongExpectedRevisionError';
  }
}

/** The store is unreachable or failed: the edges answer 503 `event_store_unavailable`. */
export class EventStoreUnavailableError extends Error {
  constructor(message: string, override readonly cause?: unknown) {
    super(message);
    this.name = 'EventStoreUnavailableError';
  }
}

/**
 * An event the store cannot keep as it is (a string with U+0000 or an unpaired surrogate, a
 * BigInt, nesting past MAX_EVENT_DEPTH): the append is refused whole, before anything is written,
 * and no other append fails with it.
 */
export class InvalidEventDataError extends TypeError {
  readonly code = 'invalid_event_data';
  constructor(readonly streamId: string, readonly eventType: string, readonly problem: string) {
    super(`Event ${eventType} on ${streamId} cannot be stored: ${problem} in its data or metadata`);
    this.name = 'InvalidEventDataError';
  }
}

/** Every adapter's append() calls this first, so the contract holds whatever the backend accepts. */
export function assertStorable(streamId: string, events: readonly EventData[]): void {
  for (const e of events) {
    const problem = jsonProblem(e.data, MAX_EVENT_DEPTH) ?? jsonProblem(e.metadata ?? null, MAX_EVENT_DEPTH);
    if (problem !== null) throw new InvalidEventDataError(streamId, e.type, problem);
  }
}

export const streamName = (category: string, id: string): string => `${category}-${id}`;
export const streamCategory = (streamId: string): string => streamId.slice(0, streamId.indexOf('-'));
