import type { EventStore, ExpectedRevision } from '../../domain/eventStore';
import { toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';
import { conflictAfterRetries, decideOnStream, eventsOf } from '../decideOnStream';

/** Reads a stream and folds the events the aggregate knows; returns the state and the revision to append at. */
export async function load<S, E extends DomainEvent>(store: EventStore, stream: string, types: readonly string[], fold: (events: E[]) => S) {
  const recorded = await store.readStream(stream);
  const expected: ExpectedRevision = recorded.length === 0 ? 'no_stream' : recorded[recorded.length - 1].revision;
  return { state: fold(eventsOf<E>(recorded, types)), expected };
}


export async function appendEvents(store: EventStore, stream: string, events: DomainEvent[], expected: ExpectedRevision, actor: string): Promise<void> {
  if (events.length === 0) return;
  await store.append(stream, events.map((e) => toEventData(newId(), e, { actor })), { expectedRevision: expected });
}

/**
 * What a lost race on a stream answers when every try lost: 409 `code`, "<subject> changed too
 * often while this request was handled" (`conflictAfterRetries`); `attempts` (default 8) tries in all.
 */
export interface Contention { code: string; subject: string; attempts?: number }

/**
 * Load → decide → append, retried (after a short random pause) when another request appended to
 * the stream in between: the decision is then taken again on the new state, so a single-use secret
 * can only be spent once. When every try lost, 409 `contention.code`.
 */
export async function decideAndAppend<S, E extends DomainEvent, R>(
  store: EventStore, stream: string, types: readonly string[], fold: (events: E[]) => S,
  decide: (state: S) => Promise<{ events: E[]; result: R }> | { events: E[]; result: R }, actor: string,
  contention: Contention,
): Promise<R> {
  let result: R | undefined;
  const options = { actor, attempts: contention.attempts ?? 8, exhausted: conflictAfterRetries(contention.code, contention.subject) };
  await decideOnStream(store, stream, options, async (recorded) => {
    const decision = await decide(fold(eventsOf<E>(recorded, types)));
    result = decision.result;
    return decision.events;
  });
  return result as R;
}
