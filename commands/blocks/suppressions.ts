import { streamName, type EventStore } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { toEventData } from '../../domain/events';
import { newId, type Clock } from '../../domain/ids';
import { blockSuppressionIdOf } from '../../domain/motorBlock/suppressions';
import { BLOCK_SUPPRESSIONS_SCHEMA } from '../../projections/blockSuppressions/projection';
import { complainedSinceLift, getBlockSuppression, type BlockSuppressionRecord } from '../../projections/blockSuppressions/queries';
import { awaitRows, type ReadYourWritesDeps } from '../readYourWrites';
import { assertBlockTakesWrites } from './deletionGuard';

/**
 * Lifting an address from a Motor Block's suppression list (docs/DELIVERY.md "Suppressions"):
 * one BlockSuppressionLifted on `blockSuppression-<id>`. The read model then drops the hard
 * bounces recorded up to it; one recorded after suppresses again. An address the recipient
 * complained about is not lifted (409 suppression_not_liftable).
 *
 * Decided on the read model, not a stream: whether the address is suppressed is derived from the
 * block's message streams, which no single stream holds. A lift of an address that was suppressed
 * an instant ago and not shown yet is a 404 the caller can retry; two concurrent lifts both append,
 * which the read model treats as one (the latest lift counts). Appended with `any`: nothing on the
 * stream is decided from.
 */

export interface BlockSuppressionDeps extends ReadYourWritesDeps { store: EventStore; clock: Clock }

/** How long the answer waits for the read model to show the lift (it is committed either way). */
const READ_MODEL_WAIT_MS = 3000;

/** Longer than any address Motor sends to, or with a control character (NUL cannot even be a PostgreSQL text value): on no list. */
const NOT_AN_ADDRESS = /[\u0000-\u001f\u007f]/;
const MAX_ADDRESS_LENGTH = 320;

export async function liftBlockSuppression(deps: BlockSuppressionDeps, motorBlockId: string, actor: string, address: string): Promise<BlockSuppressionRecord> {
  // A lift's stream names the recipient: history, which a block being deleted no longer takes
  // (the deletion job removes these streams with the rest, workers/blockDeletion.ts).
  await assertBlockTakesWrites(deps.store, motorBlockId);
  const suppressible = address.length <= MAX_ADDRESS_LENGTH && !NOT_AN_ADDRESS.test(address);
  const current = suppressible ? await getBlockSuppression(deps.db, motorBlockId, address) : null;
  if (!current) {
    throw fail('suppression_not_found', 404, 'This address is not on this Motor Block\'s suppression list', {
      nextAction: 'List the block\'s suppressions (GET /api/public/v1/motor-blocks/{id}/suppressions) for the addresses on it',
    });
  }
  // A complaint is the recipient's own word, as in the communications list (docs/COMMUNICATIONS.md
  // "Lifting a suppression"): the sender cannot undo it, also when a hard bounce came after it.
  if (current.reason === 'complaint' || await complainedSinceLift(deps.db, motorBlockId, current.address)) {
    throw fail('suppression_not_liftable', 409, 'The recipient complained about mail from this Motor Block: the suppression is the recipient\'s decision and cannot be lifted', {
      nextAction: 'Do not mail this address from this block', details: { reason: 'complaint' },
    });
  }
  const eventId = newId();
  await deps.store.append(streamName('blockSuppression', blockSuppressionIdOf(motorBlockId, current.address)), [toEventData(eventId, {
    type: 'BlockSuppressionLifted', data: { motorBlockId, address: current.address, liftedAt: deps.clock.now().toISOString() },
  }, { actor })], { expectedRevision: 'any' });
  // Read-your-writes: the next GET no longer lists the address, and the next round delivers to it.
  await awaitRows(deps, 'block_suppression.lift', { schema: BLOCK_SUPPRESSIONS_SCHEMA, table: 'lifts', key: 'event_id', rows: new Map([[eventId, null]]) }, READ_MODEL_WAIT_MS);
  return current;
}
