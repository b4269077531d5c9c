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
  for (let attempt = 1; ; attempt++) {
    const recorded = await store.readStream(streamId);
    const last = recorded.length === 0 ? null : recorded[recorded.length - 1].revision;
    const decided = [...await decide(recorded)];
    if (decided.length === 0) return { recorded, appended: [], written: [], revision: last };
    const written = decided.map((e) => toEventData(newId(), e, { actor: options.actor }));
    try {
      const r = await store.append(streamId, written, { expectedRevision: last === null ? 'no_stream' : last });
      return { recorded, appended: decided, written, revision: r.nextExpectedRevision };
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
