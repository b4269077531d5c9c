import type { Knex } from 'knex';
import { BACKGROUND_ACTOR } from './oracle';

/**
 * "Nothing was written": the events appended after a mark, less the background work that earlier
 * requests started (delivery, webhooks, exports, domain re-checks) and the event types a caller
 * allows. For the fuzz tests, which check it after every refusal, read and dry run.
 */

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The store's last global position: what a later `writtenSince` counts from. */
export const eventMark = async (db: Knex): Promise<string> => String((await db.raw('select coalesce(max(global_position), 0) as p from events')).rows[0].p);

/** Each event appended since `mark` by a request, not by background work, of a type not `allowed`, described for a failure message. */
export async function writtenSince(db: Knex, mark: string, allowed: ReadonlySet<string> = new Set()): Promise<string[]> {
  const rows: Array<{ stream_id: string; type: string; metadata: Json }> = (await db.raw('select stream_id, type, metadata from events where global_position > ? order by global_position', [mark])).rows;
  return rows.filter((e) => !BACKGROUND_ACTOR.test(String(e.metadata?.actor ?? '')) && !allowed.has(e.type))
    .map((e) => `${e.type} to ${e.stream_id} (${JSON.stringify(e.metadata)})`);
}
