import type { Knex } from 'knex';
import { schemaFor } from '../runner.js';

/**
 * Messages with a recipient that should have moved on by now: queued or processed with no event
 * for `olderThanMs`, or deferred past its next attempt by that much. The delivery sweeper re-queues
 * them; delivery rounds are idempotent, so a spurious re-queue costs one read.
 */
export async function findStalledMessageIds(db: Knex, now: Date, olderThanMs: number, limit: number, schema = schemaFor('messages')): Promise<string[]> {
  const cutoff = new Date(now.getTime() - olderThanMs);
  const r = await db.raw(
    `select distinct message_id from "${schema}"."message_recipients"
      where not is_terminal and coalesce(next_attempt_at, last_event_at) < ?
      limit ?`,
    [cutoff, limit],
  );
  return r.rows.map((row: { message_id: string }) => row.message_id);
}
