import { WrongExpectedRevisionError, type EventData, type EventStore, type RecordedEvent } from '../domain/eventStore';
import { fail } from '../domain/errors';
import { asDomainEvent, toEventData, type DomainEvent } from '../domain/events';
import { newId } from '../domain/ids';

export interface DecideOptions {
  /** Who appends (the events' `actor` metadata). */
  actor: string;
  /** Tries in all, the first one included. */
  attempts: number;
  /**
   * Thrown when every try lost to another writer: the caller's 409 `<what>_conflict`
   * (`conflictAfterRetries`), never the store's WrongExpectedRevisionError, which no edge should
   * have to know about (docs/ERRORS.md "Any route: concurrent changes").
   */
  exhausted: (conflict: WrongExpectedRevisionError) => Error;
}

/**
 * The pause after the `attempt`-th lost try: at random up to 10 ms × 2^(attempt−1), at most
 * 200 ms ("full jitter"). Writers that collided once spread out instead of colliding again on
 * the next read; a burst of N writers on one stream settles in a few tries instead of N.
 */
export function retryPauseMs(attempt: number): number {
  return Math.random() * Math.min(10 * 2 ** (attempt - 1), 200);
}

/**
 * The usual `exhausted`: 409 `code` ("<what>_conflict"), "<subject> changed too often while this
 * request was handled", nextAction "Retry the request". Nothing of the request was appended.
 */
export const conflictAfterRetries = (code: string, subject: string) => (): Error =>
  fail(code, 409, `${subject} changed too often while this request was handled`, { nextAction: 'Retry the request' });

export interface Decision<E> {
  /** The stream the last decision was taken on. */
  recorded: RecordedEvent[];
  /** What was appended: nothing when the decision was to do nothing. */
  appended: E[];
  /** The appended events as stored (their ids). */
  written: EventData[];
  /** The stream's revision after this: its last revision when nothing was appended, null when there is no stream. */
  revision: bigint | null;
}

/**
 * Optimistic concurrency on one stream, the loop every command of Motor's aggregates runs: read the
 * stream, decide on what it holds, append what was decided at the revision read. When another
 * writer appended in between, the decision is taken again on the new stream after a short random
 * pause (`retryPauseMs`), up to `options.attempts` tries, then `options.exhausted` is thrown.
 * Nothing decided: nothing appended. `decide` may throw (a refusal) and
 * may be called more than once.
 */
export async function decideOnStream<E extends DomainEvent>(
  store: EventStore, streamId: string, options: DecideOptions,
  decide: (recorded: RecordedEvent[]) => readonly E[] | Promise<readonly E[]>,
): Promise<Decision<E>> {
  const d = await decideOnRead(store, streamId, options, async () => {
    const recorded = await store.readStream(streamId);
    return { read: recorded, revision: recorded.length === 0 ? null : recorded[recorded.length - 1].revision };
  }, decide);
  return { recorded: d.read, appended: d.appended, written: d.written, revision: d.revision };
}

/** What one try of `decideOnRead` read: what `decide` is given, and the revision of the stream's last event it includes (null: no stream). */
export interface StreamRead<T> { read: T; revision: bigint | null }

/** `Decision`, with what the last try read in place of the whole stream. */
export interface ReadDecision<T, E> { read: T; appended: E[]; written: EventData[]; revision: bigint | null }

/**
 * The loop of `decideOnStream`, with the read left to the caller: for a stream whose state the
 * process keeps folded (commands/oauth/grantCache.ts), `read` reads only the events after the
 * revision kept and folds them onto the state kept. Whatever it reads, the `revision` it answers
 * must be that of the last event its `read` includes, no more and no less: the append is made at
 * that revision, so the store refuses a decision taken on a state that misses an event, and the
 * next try calls `read` again, which must then see it.
 */
export async function decideOnRead<T, E extends DomainEvent>(
  store: EventStore, streamId: string, options: DecideOptions,
  read: () => Promise<StreamRead<T>>,
  decide: (read: T) => readonly E[] | Promise<readonly E[]>,
): Promise<ReadDecision<T, E>> {
  for (let attempt = 1; ; attempt++) {
    const r = await read();
    const decided = [...await decide(r.read)];
    if (decided.length === 0) return { read: r.read, appended: [], written: [], revision: r.revision };
    const written = decided.map((e) => toEventData(newId(), e, { actor: options.actor }));
    try {
      const appended = await store.append(streamId, written, { expectedRevision: r.revision === null ? 'no_stream' : r.revision });
      return { read: r.read, appended: decided, written, revision: appended.nextExpectedRevision };
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError)) throw err;
      if (attempt >= options.attempts) throw options.exhausted(err);
      await new Promise((resolve) => setTimeout(resolve, retryPauseMs(attempt)));
    }
  }
}

/** The events of `recorded` whose types are in `types` (an aggregate's own), typed. */
export const eventsOf = <E extends DomainEvent>(recorded: readonly RecordedEvent[], types: readonly string[]): E[] =>
  recorded.map(asDomainEvent).filter((e): e is E => e !== null && types.includes(e.type));
