import type { Knex } from 'knex';
import type { RecordedEvent } from '../domain/eventStore';
import type { MotorBlockDeleted } from '../domain/events';
import { withLongStatements } from '../infra/db';

/**
 * How read models forget a deleted block's history (docs/BLOCKS.md "How the log forgets"). The
 * deletion job removes the block's message streams from the store, then appends the tombstone
 * `MotorBlockDeleted` with `historyDeleted: true`. A projection that keeps per-block rows handles
 * the tombstone by deleting them; events before the tombstone in the same batch are applied
 * first, so the result is what a replay from zero gives (the streams are gone, the tombstone
 * stays and deletes nothing).
 */
export const TOMBSTONE = 'MotorBlockDeleted';

/**
 * A projection's batch handler from `apply` and `forget`. `forget` deletes every row of a block in
 * a statement or a few, millions for a block that sent for years: it runs under the long deadline
 * (infra/db.ts LONG_QUERY_TIMEOUT_MS), as the request's would cut it again on every retry of the
 * batch and stop the read model there.
 */
export function withTombstones(
  apply: (trx: Knex.Transaction, schema: string, events: RecordedEvent[]) => Promise<void>,
  forget: (trx: Knex.Transaction, schema: string, motorBlockId: string) => Promise<void>,
) {
  return async (trx: Knex.Transaction, schema: string, events: RecordedEvent[]): Promise<void> => {
    let start = 0;
    for (let i = 0; i < events.length; i++) {
      if (events[i].type !== TOMBSTONE) continue;
      if (i > start) await apply(trx, schema, events.slice(start, i));
      const d = events[i].data as MotorBlockDeleted;
      if (d?.historyDeleted === true && typeof d.motorBlockId === 'string') await withLongStatements(trx, () => forget(trx, schema, d.motorBlockId));
      start = i + 1;
    }
    if (start === 0) await apply(trx, schema, events);
    else if (start < events.length) await apply(trx, schema, events.slice(start));
  };
}
