import type { Knex } from 'knex';
import { WrongExpectedRevisionError, type EventStore, type ExpectedRevision, type GlobalPosition } from '../domain/eventStore';
import { fail } from '../domain/errors';
import { toEventData, type DomainEvent } from '../domain/events';
import { newId } from '../domain/ids';
import type { Logger } from '../infra/logger';
import type { Metrics } from '../infra/metrics';
import { DIRECTORY_SCHEMA } from '../projections/directory/queries';
import { readCheckpoint } from '../projections/runner';

/**
 * Read-your-writes for the management routes. A command appends to one stream and learns the
 * revision it wrote (AppendResult.nextExpectedRevision); the read-model row of that stream records
 * the revision it reflects. Before answering, the route waits until the row has caught up, so the
 * caller's next GET (a list, the send path) sees its own change. Commands decide on the streams
 * themselves, never on the read model: this wait is only about what the caller reads next.
 *
 * Every wait returns false when the projector did not get there within its time (it is down or far
 * behind); the write is committed either way, so routes still answer with what they wrote. That
 * give-up is the one thing the caller cannot see, so it is reported: a warning in the log naming
 * the wait, the time it waited and the rows (revisions) it waited for, and one more on
 * `motor_read_your_writes_timeouts_total{projection, wait}` (docs/OPERATIONS.md).
 */

/** What a wait needs: the read models, and where a wait that gives up is reported. */
export interface ReadYourWritesDeps { db: Knex; logger: Logger; metrics: Metrics }

/**
 * The rows one wait waits for, in one read-model table: each row's key (column `key`, `id` by
 * default) with the revision the row must reach, or null when the row being there is enough (rows
 * keyed by the event that made them).
 */
export interface AwaitedRows { schema: string; table: string; key?: string; rows: ReadonlyMap<string, bigint | null> }

/** Rows of a give-up warning: enough to find them, not a 1,000-row batch's every id. */
const PENDING_LOGGED = 10;

/**
 * Polls `caughtUp` (5 ms, doubling to 100 ms between tries) until it says yes (true) or
 * `timeoutMs` would pass before the next try (false). Reports nothing: the waits below do; the
 * block-deletion worker uses it for waits it fails on.
 */
export async function pollUntil(caughtUp: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 5; ; delay = Math.min(delay * 2, 100)) {
    if (await caughtUp()) return true;
    if (Date.now() + delay > deadline) return false;
    await new Promise((r) => setTimeout(r, delay));
  }
}

/** Where `awaitProjectionAtHead` left off: whether it got there, the head it waited for, the checkpoint it last read. */
export interface AtHead { caughtUp: boolean; head: GlobalPosition | null; checkpoint: GlobalPosition | null; waitedMs: number }

/** What `awaitProjectionAtHead` waits for. */
export interface HeadWait {
  /** The projection whose read model the decision reads. */
  projection: string;
  /** The event types the decision depends on (those of them the projection handles). */
  types: readonly string[];
  /** The decision, for the counter: one of a fixed set (`webhook.pause`, `block.delete_history`). */
  wait: string;
  timeoutMs: number;
}

/**
 * Waits until the projection's checkpoint is at or past the last event of `types` in the log as
 * of the call (EventStore.headPosition with `types`): every such event committed before it is
 * then in the read model, so a decision that the read model has no row of something (no message
 * of a block, no success of an endpoint) is not a stale read. The last event of those types, not
 * the log's head: a projection following a type filter on KurrentDB is told of positions past its
 * own events only now and then, and events it does not read change nothing here.
 * `caughtUp` false when it did not get there within `timeoutMs` (its projector is stopped or far
 * behind): counted on `motor_projection_head_wait_timeouts_total{projection, wait}`; the caller
 * decides what it means and logs it.
 */
export async function awaitProjectionAtHead(deps: { store: EventStore; db: Knex; metrics: Metrics }, w: HeadWait): Promise<AtHead> {
  const started = Date.now();
  const head = await deps.store.headPosition({ types: w.types });
  if (head === null) return { caughtUp: true, head, checkpoint: null, waitedMs: 0 };
  let checkpoint: GlobalPosition | null = null;
  const caughtUp = await pollUntil(async () => {
    checkpoint = await readCheckpoint(deps.db, w.projection);
    return checkpoint !== null && deps.store.comparePositions(checkpoint, head) >= 0;
  }, w.timeoutMs);
  if (!caughtUp) deps.metrics.projectionHeadWaitTimeouts.inc({ projection: w.projection, wait: w.wait });
  return { caughtUp, head, checkpoint, waitedMs: Date.now() - started };
}

/**
 * The read-your-writes wait every route uses: until every row of `target` is shown (one query per
 * poll for the rows not there yet, never a query per row), or `timeoutMs`. `wait` names it in the
 * warning and the counter (`<resource>.<action>`, e.g. `contact.add_batch`): one of a fixed set, never
 * an id, as it is a metric label.
 */
export async function awaitRows(deps: ReadYourWritesDeps, wait: string, target: AwaitedRows, timeoutMs = 10_000): Promise<boolean> {
  const key = target.key ?? 'id';
  // Keys are uuids, which PostgreSQL compares whatever their case and returns in lower case.
  const pending = new Map([...target.rows].map(([id, revision]) => [id.toLowerCase(), revision]));
  const columns = [...target.rows.values()].some((r) => r !== null) ? [key, 'revision'] : [key];
  const started = Date.now();
  const shown = await pollUntil(async () => {
    if (pending.size === 0) return true;
    const rows = (await deps.db.withSchema(target.schema).table(target.table).whereIn(key, [...pending.keys()]).select(columns)) as Array<Record<string, string>>;
    for (const row of rows) {
      const revision = pending.get(row[key]);
      if (revision === null || (revision !== undefined && BigInt(row.revision) >= revision)) pending.delete(row[key]);
    }
    return pending.size === 0;
  }, timeoutMs);
  if (!shown) gaveUp(deps, wait, target, pending, Date.now() - started, timeoutMs);
  return shown;
}

function gaveUp(deps: ReadYourWritesDeps, wait: string, target: AwaitedRows, pending: ReadonlyMap<string, bigint | null>, waitedMs: number, timeoutMs: number): void {
  // rm_<name> is the live schema of projection <name> (projections/runner.ts): the label the lag gauges use.
  const projection = target.schema.replace(/^rm_/, '');
  deps.metrics.readYourWritesTimeouts.inc({ projection, wait });
  deps.logger.warn({
    wait, projection, waitedMs, timeoutMs,
    position: {
      table: target.table, rows: target.rows.size, notShown: pending.size,
      pending: [...pending].slice(0, PENDING_LOGGED).map(([id, revision]) => ({ id, revision: revision === null ? null : revision.toString() })),
    },
  }, 'read-your-writes wait gave up');
}

/** The same wait on one row with a `revision` column, keyed by `id` (3 s by default). */
export function awaitRow(deps: ReadYourWritesDeps, wait: string, target: { schema: string; table: string; id: string; revision: bigint }, timeoutMs = 3000): Promise<boolean> {
  return awaitRows(deps, wait, { schema: target.schema, table: target.table, rows: new Map([[target.id, target.revision]]) }, timeoutMs);
}

/** The directory tables whose rows record the revision of their stream. */
type DirectoryTable = 'accounts' | 'domains' | 'motor_blocks' | 'free_recipient_lists';

/** The same wait on a directory row. */
export function awaitDirectoryRow(
  deps: ReadYourWritesDeps,
  wait: string,
  table: DirectoryTable,
  id: string,
  revision: bigint,
  timeoutMs = 3000,
): Promise<boolean> {
  return awaitRow(deps, wait, { schema: DIRECTORY_SCHEMA, table, id, revision }, timeoutMs);
}

/** Whether the directory row `id` of `table` shows `revision` yet: for waits that are not read-your-writes (workers). */
export async function directoryRowShows(db: Knex, table: DirectoryTable, id: string, revision: bigint): Promise<boolean> {
  const row = (await db.withSchema(DIRECTORY_SCHEMA).table(table).where({ id }).first('revision')) as { revision: string } | undefined;
  return row !== undefined && BigInt(row.revision) >= revision;
}

/**
 * A management command's write: one event on the resource's own stream, then the wait until its
 * read-model row (with a `revision` column, keyed by the resource id) shows it. A concurrent change
 * of the same resource is 409 `<what>_conflict`.
 */
export async function appendAndAwaitRow(
  deps: { store: EventStore } & ReadYourWritesDeps,
  target: { streamId: string; schema: string; table: string; id: string; what: string; wait: string },
  event: DomainEvent,
  expected: ExpectedRevision,
  actor: string,
): Promise<void> {
  try {
    const r = await deps.store.append(target.streamId, [toEventData(newId(), event, { actor })], { expectedRevision: expected });
    await awaitRow(deps, target.wait, { schema: target.schema, table: target.table, id: target.id, revision: r.nextExpectedRevision });
  } catch (err) {
    if (err instanceof WrongExpectedRevisionError) {
      throw fail(`${target.what}_conflict`, 409, `The ${target.what} changed while this request was handled`, { nextAction: 'Read it again and retry' });
    }
    throw err;
  }
}
