import type { EventStore, ExpectedRevision } from '../../domain/eventStore';
import { WrongExpectedRevisionError } from '../../domain/eventStore';
import { asDomainEvent, toEventData, type DomainEvent } from '../../domain/events';
import { newId } from '../../domain/ids';

/** Reads a stream and folds the events the aggregate knows; returns the state and the revision to append at. */
export async function load<S, E extends DomainEvent>(store: EventStore, stream: string, types: readonly string[], fold: (events: E[]) => S) {
  const recorded = await store.readStream(stream);
  const events = recorded.map(asDomainEvent).filter((e): e is E => e !== null && types.includes(e.type));
  const expected: ExpectedRevision = recorded.length === 0 ? 'no_stream' : recorded[recorded.length - 1].revision;
  return { state: fold(events), expected };
}

export async function appendEvents(store: EventStore, stream: string, events: DomainEvent[], expected: ExpectedRevision, actor: string): Promise<void> {
  if (events.length === 0) return;
  await store.append(stream, events.map((e) => toEventData(newId(), e, { actor })), { expectedRevision: expected });
}

/**
 * Load → decide → append, retried when another request appended to the stream in between (the
 * decision is then taken again on the new state: a single-use secret can only be spent once).
 */
export async function decideAndAppend<S, E extends DomainEvent, R>(
  store: EventStore, stream: string, types: readonly string[], fold: (events: E[]) => S,
  decide: (state: S) => Promise<{ events: E[]; result: R }> | { events: E[]; result: R }, actor: string,
): Promise<R> {
  for (let attempt = 0; ; attempt++) {
    const { state, expected } = await load<S, E>(store, stream, types, fold);
    const { events, result } = await decide(state);
    try {
      await appendEvents(store, stream, events, expected, actor);
      return result;
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) || attempt >= 4) throw err;
    }
  }
}
