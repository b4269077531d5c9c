import type { Knex } from 'knex';
import type { EventStore, RecordedEvent } from '../../domain/eventStore';
import { streamName } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { isUuid } from '../../domain/ids';
import { accountGrantId, covers, grantOf } from '../../domain/motorBlock/grant';
import {
  MOTOR_BLOCK_EVENTS, decide, evolve, fold, type MotorBlock, type MotorBlockCommand, type MotorBlockEvent, type MotorBlockState,
} from '../../domain/motorBlock/motorBlock';
import { getBlock, listLiveBlocksOfAccount, blockIdsOfGrant, type BlockRecord } from '../../projections/directory/queries';
import { conflictAfterRetries, decideOnStream, eventsOf } from '../decideOnStream';

/**
 * The grant check every account block route uses (docs/BLOCKS.md "Grants"): which blocks may be
 * touched is decided by the caller's current grant, read live on each call. Listing reads the
 * directory; a command reads the block's own stream, so a block created a moment ago is covered.
 */

export interface GrantHolder { accountId: string }

/** Blocks the caller's grant covers (not deleted; inactive and deletion_queued included). */
export async function blocksCoveredBy(db: Knex, principal: GrantHolder): Promise<BlockRecord[]> {
  const grantId = grantOf(principal);
  if (grantId === accountGrantId(principal.accountId)) return listLiveBlocksOfAccount(db, principal.accountId);
  const blocks = await Promise.all((await blockIdsOfGrant(db, grantId)).map((id) => getBlock(db, id)));
  return blocks.filter((b): b is BlockRecord => b !== null && b.status !== 'deleted');
}

/** The block's state from its stream and the revision to append at. */
export async function loadBlock(store: EventStore, motorBlockId: string) {
  const recorded = await store.readStream(streamName('motorBlock', motorBlockId));
  return { state: blockOf(recorded), revision: recorded.length === 0 ? null : recorded[recorded.length - 1].revision };
}

const blockOf = (recorded: readonly RecordedEvent[]): MotorBlockState => fold(eventsOf<MotorBlockEvent>(recorded, MOTOR_BLOCK_EVENTS));

/**
 * Load, decide, append at the loaded revision; decided again when another writer appended in
 * between (up to 6 tries, then 409 motor_block_conflict). `command` sees the loaded state first (a caller's own checks go there).
 * `revision`: where the stream is after it (null: no stream and nothing appended).
 */
export async function decideOnBlock(
  store: EventStore, actor: string, motorBlockId: string,
  command: (state: MotorBlockState) => Promise<MotorBlockCommand>,
): Promise<{ before: MotorBlockState; after: MotorBlockState; appended: boolean; revision: bigint | null }> {
  let before: MotorBlockState = null;
  const d = await decideOnStream(store, streamName('motorBlock', motorBlockId), {
    actor, attempts: 6, exhausted: conflictAfterRetries('motor_block_conflict', 'The Motor Block'),
  }, async (recorded) => {
    before = blockOf(recorded);
    return decide(await command(before), before);
  });
  return { before, after: d.appended.reduce(evolve, before), appended: d.appended.length > 0, revision: d.revision };
}

export const notAuthorized = () => fail('motor_block_not_authorized', 403, 'The current grant does not cover this Motor Block', {
  nextAction: 'Use a credential whose grant covers this block',
});

/**
 * The block when the caller's grant covers it. A malformed id is 400; a block that does not exist,
 * is deleted or is another account's is 404 (ids of other accounts do not leak); a block of the
 * account that the grant does not cover is 403 motor_block_not_authorized.
 */
export async function assertGrantCovers(store: EventStore, principal: GrantHolder, motorBlockId: string): Promise<MotorBlock> {
  if (!isUuid(motorBlockId)) throw fail('invalid_id', 400, 'Motor Block id must be a uuid');
  const { state } = await loadBlock(store, motorBlockId);
  if (state === null || state.accountId !== principal.accountId || state.status === 'deleted') {
    throw fail('motor_block_not_found', 404, 'No such Motor Block in this account', { nextAction: 'List your blocks: GET /api/public/v1/account/motor-blocks' });
  }
  if (!covers(grantOf(principal), state)) throw notAuthorized();
  return state;
}

/** The infrastructure check: true when covered; 403 for anything else (never says whether the block exists). */
export async function isCovered(store: EventStore, principal: GrantHolder, motorBlockId: string): Promise<boolean> {
  if (!isUuid(motorBlockId)) return false;
  const { state } = await loadBlock(store, motorBlockId);
  return covers(grantOf(principal), state);
}
