import type { Knex } from 'knex';
import { streamName, WrongExpectedRevisionError, type EventStore, type RecordedEvent } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { asDomainEvent, toEventData, type SuppressionAdded } from '../../domain/events';
import { newId, type Clock } from '../../domain/ids';
import {
  decideAdd, fold, LIFTABLE_REASONS, manualSuppressionFields, suppressionIdOf, SUPPRESSION_STREAM_EVENT_TYPES, type SuppressionStreamEvent,
} from '../../domain/comms/suppressions';
import { SUPPRESSIONS_SCHEMA } from '../../projections/commSuppressions/projection';
import { getSuppression, type SuppressionView } from '../../projections/commSuppressions/queries';
import { pollUntil } from '../readYourWrites';

/**
 * What the tenant decides about an address itself (docs/COMMUNICATIONS.md "Suppressions",
 * "Lifting a suppression"), on the suppression's stream `suppression-<id>`:
 * - a manual suppression (`SuppressionAdded`), decided on the stream and appended at the revision
 *   read, so of concurrent adds of one address one appends and the others, deciding again, find it
 *   active and append nothing;
 * - a lift (`SuppressionLifted`): the read model then drops the hard bounces recorded up to it and
 *   the manual adds before it, so the row goes (or keeps only what remains). Complaints and
 *   unsubscribes are the recipient's own decision and are never lifted: 409 suppression_not_liftable.
 */

export interface SuppressionDeps { store: EventStore; db: Knex; clock: Clock }

/** How long the answer waits for the read model to show the change (the write is committed either way). */
const READ_MODEL_WAIT_MS = 3000;
/** A conflict is another add or a lift of this very address; deciding again settles an add, so few attempts are needed. */
const MAX_ATTEMPTS = 5;

const streamEvents = (recorded: RecordedEvent[]): SuppressionStreamEvent[] =>
  recorded.map(asDomainEvent).filter((e): e is SuppressionStreamEvent => e !== null && (SUPPRESSION_STREAM_EVENT_TYPES as readonly string[]).includes(e.type));

/**
 * `POST /suppressions`: suppresses the address for the tenant by hand (reason `manual`, unless a
 * stronger reason holds). `created` is false when a manual suppression of the address was active
 * already: nothing is appended and the record is answered as it is.
 */
export async function addManualSuppression(deps: SuppressionDeps, tenantId: string, actor: string, body: unknown): Promise<{ created: boolean; suppression: SuppressionView }> {
  const { email, note } = manualSuppressionFields(body);
  const id = suppressionIdOf(tenantId, email);
  const stream = streamName('suppression', id);
  for (let attempt = 1; ; attempt++) {
    const recorded = await deps.store.readStream(stream);
    const decided = decideAdd(fold(streamEvents(recorded)), { suppressionId: id, tenantId, email, note, now: deps.clock.now() });
    if (decided.length === 0) {
      const active = recorded.findLast((e) => e.type === 'SuppressionAdded') as RecordedEvent<'SuppressionAdded', SuppressionAdded>;
      return { created: false, suppression: await recordOnceShown(deps.db, active.id, active.data) };
    }
    const written = decided.map((e) => toEventData(newId(), e, { actor }));
    try {
      await deps.store.append(stream, written, { expectedRevision: recorded.length === 0 ? 'no_stream' : recorded[recorded.length - 1].revision });
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError)) throw err;
      if (attempt >= MAX_ATTEMPTS) throw fail('suppression_conflict', 409, 'This address\'s suppression changed too often while the request was handled', { nextAction: 'Retry the request' });
      await new Promise((res) => setTimeout(res, Math.random() * 10 * attempt));
      continue;
    }
    const added = written[written.length - 1];
    return { created: true, suppression: await recordOnceShown(deps.db, added.id, added.data as SuppressionAdded) };
  }
}

/**
 * Read-your-writes for an add: the record once the projection has applied the add (its row in
 * `manual_adds`). A projector that did not get there in time: the record the add alone makes
 * (the write is committed; the next GET shows the whole row once the projector catches up).
 */
async function recordOnceShown(db: Knex, eventId: string, added: SuppressionAdded): Promise<SuppressionView> {
  const shown = await pollUntil(async () => (await db.withSchema(SUPPRESSIONS_SCHEMA).table('manual_adds').where({ event_id: eventId }).first('event_id')) !== undefined, READ_MODEL_WAIT_MS);
  // Not shown yet: a row there is from before the add (a hard bounce's, say), not what the add made.
  return (shown ? await getSuppression(db, added.tenantId, added.suppressionId) : null) ?? {
    id: added.suppressionId, email: added.email, reason: 'manual', count: 1, first_at: added.addedAt, last_at: added.addedAt,
    last_message_id: null, last_motor_block_id: null, smtp_code: null, enhanced_code: null, note: added.note,
  };
}

export async function liftSuppression(deps: SuppressionDeps, tenantId: string, actor: string, givenId: string): Promise<{ id: string; email: string; lifted: true }> {
  const id = givenId.toLowerCase(); // an id written in capitals is the same suppression, as list, contact and campaign ids are
  const current = await getSuppression(deps.db, tenantId, id);
  if (!current) throw fail('suppression_not_found', 404, 'No such suppression for this tenant');
  if (!LIFTABLE_REASONS.includes(current.reason)) {
    throw fail('suppression_not_liftable', 409, `A suppression for ${current.reason === 'complaint' ? 'a complaint' : 'an unsubscribe'} is the recipient's decision and cannot be lifted`, {
      details: { reason: current.reason },
      nextAction: 'Only the recipient can undo it (by subscribing again); hard bounces and manual suppressions alone can be lifted',
    });
  }
  const eventId = newId();
  await deps.store.append(streamName('suppression', id), [toEventData(eventId, {
    type: 'SuppressionLifted', data: { suppressionId: id, tenantId, email: current.email, liftedAt: deps.clock.now().toISOString() },
  }, { actor })], { expectedRevision: 'any' });
  await awaitLift(deps.db, eventId);
  return { id, email: current.email, lifted: true };
}

/** Read-your-writes: until the projection has applied the lift (its row in `lifts`), so the next GET no longer lists the address. */
function awaitLift(db: Knex, eventId: string): Promise<boolean> {
  return pollUntil(async () => (await db.withSchema(SUPPRESSIONS_SCHEMA).table('lifts').where({ event_id: eventId }).first('event_id')) !== undefined, READ_MODEL_WAIT_MS);
}
