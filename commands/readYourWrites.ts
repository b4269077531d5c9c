import type { Knex } from 'knex';
import { WrongExpectedRevisionError, type EventStore, type ExpectedRevision } from '../domain/eventStore';
import { fail } from '../domain/errors';
import { toEventData, type DomainEvent } from '../domain/events';
import { newId } from '../domain/ids';
import { DIRECTORY_SCHEMA } from '../projections/directory/queries';

/**
 * Read-your-writes for the management routes. A command appends to one stream and learns the
 * revision it wrote (AppendResult.nextExpectedRevision); the directory row of that stream records
 * the revision it reflects. Before answering, the route waits until the row has caught up, so the
 * caller's next GET (a list, the send path) sees its own change. Commands decide on the streams
 * themselves, never on the read model: this wait is only about what the caller reads next.
 *
 * Returns false when the projector did not get there within `timeoutMs` (it is down or far
 * behind); the write is committed either way, so routes still answer with what they wrote.
 */
export function awaitDirectoryRow(
  db: Knex,
  table: 'accounts' | 'domains' | 'motor_blocks' | 'free_recipient_lists',
  id: string,
  revision: bigint,
  timeoutMs = 3000,
): Promise<boolean> {
  return awaitRow(db, DIRECTORY_SCHEMA, table, id, revision, timeoutMs);
}

/**
 * Polls `caughtUp` (5 ms, doubling to 100 ms between tries) until it says yes (true) or
 * `timeoutMs` has passed (false): the wait every read-your-writes helper below is made of.
 */
export async function pollUntil(caughtUp: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 5; ; delay = Math.min(delay * 2, 100)) {
    if (await caughtUp()) return true;
    if (Date.now() + delay > deadline) return false;
    await new Promise((r) => setTimeout(r, delay));
  }
}

/** The same wait on any read-model row with a `revision` column (e.g. webhook endpoints). */
export function awaitRow(db: Knex, schema: string, table: string, id: string, revision: bigint, timeoutMs = 3000): Promise<boolean> {
  return pollUntil(async () => {
    const row = (await db.withSchema(schema).table(table).where({ id }).first('revision')) as { revision: string } | undefined;
    return row !== undefined && BigInt(row.revision) >= revision;
  }, timeoutMs);
}

/**
 * The same wait for many rows of one table (a batch's writes): `revisions` maps each row id to the
 * revision it must reach. One query per poll for the rows not there yet, never a query per row.
 */
export function awaitRows(db: Knex, schema: string, table: string, revisions: ReadonlyMap<string, bigint>, timeoutMs = 10_000): Promise<boolean> {
  const pending = new Map(revisions);
  return pollUntil(async () => {
    if (pending.size === 0) return true;
    const rows = (await db.withSchema(schema).table(table).whereIn('id', [...pending.keys()]).select('id', 'revision')) as Array<{ id: string; revision: string }>;
    for (const row of rows) if (BigInt(row.revision) >= pending.get(row.id)!) pending.delete(row.id);
    return pending.size === 0;
  }, timeoutMs);
}

/**
 * A management command's write: one event on the resource's own stream, then the wait until its
 * read-model row (with a `revision` column, keyed by the resource id) shows it. A concurrent change
 * of the same resource is 409 `<what>_conflict`.
 */
export async function appendAndAwaitRow(
  deps: { store: EventStore; db: Knex },
  target: { streamId: string; schema: string; table: string; id: string; what: string },
  event: DomainEvent,
  expected: ExpectedRevision,
  actor: string,
): Promise<void> {
  try {
    const r = await deps.store.append(target.streamId, [toEventData(newId(), event, { actor })], { expectedRevision: expected });
    await awaitRow(deps.db, target.schema, target.table, target.id, r.nextExpectedRevision);
  } catch (err) {
    if (err instanceof WrongExpectedRevisionError) {
      throw fail(`${target.what}_conflict`, 409, `The ${target.what} changed while this request was handled`, { nextAction: 'Read it again and retry' });
    }
    throw err;
  }
}
