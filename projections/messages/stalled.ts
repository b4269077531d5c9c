import type { Knex } from 'knex';
import { schemaFor } from '../runner.js';

export interface StalledMessage {
  messageId: string;
  /** messages.content_bytes: null for a row made before that column (until a replay) or whose size is not known. */
  contentBytes: number | null;
}

/**
 * Messages with a recipient that should have moved on by now: queued or processed with no event
 * for `olderThanMs`, or deferred past its next attempt by that much, with their size so that the
 * sweeper's job waits for room in the delivery memory budget before it reads the message. The
 * delivery sweeper re-queues them; delivery rounds are idempotent, so a spurious re-queue costs
 * one read.
 */
export async function findStalledMessages(db: Knex, now: Date, olderThanMs: number, limit: number, schema = schemaFor('messages')): Promise<StalledMessage[]> {
  const cutoff = new Date(now.getTime() - olderThanMs);
  // The size is looked up for the (at most `limit`) stalled ids only, by primary key.
  const r = await db.raw(
    `select s.message_id, m.content_bytes
       from (select distinct message_id from "${schema}"."message_recipients"
              where not is_terminal and coalesce(next_attempt_at, last_event_at) < ?
              limit ?) s
       left join "${schema}"."messages" m on m.id = s.message_id`,
    [cutoff, limit],
  );
  return r.rows.map((row: { message_id: string; content_bytes: number | null }) => ({ messageId: row.message_id, contentBytes: row.content_bytes }));
}
