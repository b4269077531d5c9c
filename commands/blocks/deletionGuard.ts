import type { EventStore } from '../../domain/eventStore';
import type { DomainError } from '../../domain/errors';
import { errors } from '../../domain/motorBlock/motorBlock';
import { loadBlock } from './grants';

/**
 * From its deletion request on, nothing more of a block's history is written (docs/BLOCKS.md
 * "Writers that race the scan"): the deletion job removes the history streams it finds in the log
 * up to its start, and a stream created after that would stay. Writers that are not log followers
 * (API routes, SMTP) ask here before they append.
 */

/** Deleted, or its deletion is queued (also a deletion that failed: the block stays deletion_queued). */
export const isDeletedOrDeleting = (status: string | null | undefined): boolean => status === 'deletion_queued' || status === 'deleted';

/**
 * Why a write belonging to the block is refused now, read from the block's own stream (not a
 * cache, not the directory: the deletion request is there the moment it is appended): 404
 * motor_block_not_found for a deleted (or unknown) block, 409 motor_block_delete_in_progress while
 * its deletion is queued, as every account block route answers. Null when the block takes writes.
 */
export async function deletionRefusal(store: EventStore, motorBlockId: string): Promise<DomainError | null> {
  const { state } = await loadBlock(store, motorBlockId);
  if (state === null || state.status === 'deleted') return errors.notFound();
  if (state.status === 'deletion_queued') return errors.deleteInProgress();
  return null;
}

export async function assertBlockTakesWrites(store: EventStore, motorBlockId: string): Promise<void> {
  const refusal = await deletionRefusal(store, motorBlockId);
  if (refusal) throw refusal;
}
