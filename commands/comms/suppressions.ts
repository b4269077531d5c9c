import type { Knex } from 'knex';
import { streamName, type EventStore } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { toEventData } from '../../domain/events';
import { newId, type Clock } from '../../domain/ids';
import { LIFTABLE_REASONS } from '../../domain/comms/suppressions';
import { SUPPRESSIONS_SCHEMA } from '../../projections/commSuppressions/projection';
import { getSuppression } from '../../projections/commSuppressions/queries';
import { pollUntil } from '../readYourWrites';

/**
 * Lifting a suppression (docs/COMMUNICATIONS.md "Lifting a suppression"): the tenant says an
 * address that hard-bounced can be mailed again (the mailbox exists now, the domain was fixed).
 * One `SuppressionLifted` on the suppression's stream; the read model then drops the hard bounces
 * recorded up to it, so the row goes (or keeps only what remains). Complaints and unsubscribes are
 * the recipient's own decision and are never lifted: 409 suppression_not_liftable.
 */

export interface SuppressionDeps { store: EventStore; db: Knex; clock: Clock }

/** How long the answer waits for the read model to show the lift (the write is committed either way). */
const READ_MODEL_WAIT_MS = 3000;

export async function liftSuppression(deps: SuppressionDeps, tenantId: string, actor: string, id: string): Promise<{ id: string; email: string; lifted: true }> {
  const current = await getSuppression(deps.db, tenantId, id);
  if (!current) throw fail('suppression_not_found', 404, 'No such suppression for this tenant');
  if (!LIFTABLE_REASONS.includes(current.reason)) {
    throw fail('suppression_not_liftable', 409, `A suppression for ${current.reason === 'complaint' ? 'a complaint' : 'an unsubscribe'} is the recipient's decision and cannot be lifted`, {
      details: { reason: current.reason },
      nextAction: 'Only the recipient can undo it (by subscribing again); hard bounces alone can be lifted',
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
