import { streamName, type EventStore, type RecordedEvent } from '../../domain/eventStore';
import { fail } from '../../domain/errors';
import { toEventData, type SuppressionAdded } from '../../domain/events';
import { newId, type Clock } from '../../domain/ids';
import {
  decideAdd, fold, LIFTABLE_REASONS, manualSuppressionFields, planSuppressionBatch, SUPPRESSION_BATCH_LIMITS, suppressionIdOf, SUPPRESSION_STREAM_EVENT_TYPES,
  type ManualSuppressionFields, type SuppressionStreamEvent,
} from '../../domain/comms/suppressions';
import type { BatchItemError, BatchPlanItem } from '../../domain/comms/batch';
import { SUPPRESSIONS_SCHEMA } from '../../projections/commSuppressions/projection';
import { getSuppression, type SuppressionView } from '../../projections/commSuppressions/queries';
import { decideOnStream, eventsOf } from '../decideOnStream';
import { awaitRows, type ReadYourWritesDeps } from '../readYourWrites';
import { eachLimited } from './batch';

/**
 * What the tenant decides about an address itself (docs/COMMUNICATIONS.md "Suppressions",
 * "Lifting a suppression"), on the suppression's stream `suppression-<id>`:
 * - a manual suppression (`SuppressionAdded`), decided on the stream and appended at the revision
 *   read, so of concurrent adds of one address one appends and the others, deciding again, find it
 *   active and append nothing;
 * - a lift (`SuppressionLifted`): the read model then drops the hard bounces recorded up to it and
 *   the manual adds before it, so the row goes (or keeps only what remains). Complaints and
 *   unsubscribes are the recipient's own decision and are never lifted: 409 suppression_not_liftable.
 */

export interface SuppressionDeps extends ReadYourWritesDeps { store: EventStore; clock: Clock }

/** How long the answer waits for the read model to show the change (the write is committed either way). */
const READ_MODEL_WAIT_MS = 3000;
/** The batch's one wait for all its adds: the contacts batch's (awaitRows). */
const BATCH_READ_MODEL_WAIT_MS = 10_000;
/** A conflict is another add or a lift of this very address; deciding again settles an add, so few attempts are needed. */
const MAX_ATTEMPTS = 5;

const streamEvents = (recorded: RecordedEvent[]): SuppressionStreamEvent[] =>
  eventsOf<SuppressionStreamEvent>(recorded, SUPPRESSION_STREAM_EVENT_TYPES);

/**
 * `POST /suppressions`: suppresses the address for the tenant by hand (reason `manual`, unless a
 * stronger reason holds). `created` is false when a manual suppression of the address was active
 * already: nothing is appended and the record is answered as it is.
 */
export async function addManualSuppression(deps: SuppressionDeps, tenantId: string, actor: string, body: unknown): Promise<{ created: boolean; suppression: SuppressionView }> {
  const { created, add } = await decideAndAppendAdd(deps, tenantId, actor, manualSuppressionFields(body));
  return { created, suppression: await recordOnceShown(deps, add.id, add.data) };
}

export interface SuppressionBatchItem {
  /** Position in the request's `suppressions`. */
  index: number;
  /** Trimmed and lower-cased; null for an invalid item without a string address (of at most 320 characters). */
  email: string | null;
  status: 'created' | 'exists' | 'invalid' | 'duplicate';
  /** created, exists, duplicate: the suppression of this address (the record's `id`). */
  id?: string;
  /** invalid: what `POST /suppressions` would have answered (code, message, field). */
  error?: BatchItemError;
}
export interface SuppressionBatchResult { created: number; existing: number; invalid: number; duplicates: number; items: SuppressionBatchItem[] }

/**
 * `POST /suppressions/batch` (docs/COMMUNICATIONS.md "Importing suppressions"): every item checked
 * as a single add, then each new address decided and appended on its own stream exactly as
 * `addManualSuppression` does (`decideAndAppendAdd`), SUPPRESSION_BATCH_LIMITS.parallelAppends at
 * a time, as the contacts batch. Per-item outcome: an invalid item does not stop the others. One
 * wait at the end for the active add of every address answered (created or exists).
 */
export async function addManualSuppressionsBatch(deps: SuppressionDeps, tenantId: string, actor: string, body: unknown): Promise<SuppressionBatchResult> {
  const plan = planSuppressionBatch(body);
  const toAdd = plan.filter((p): p is Extract<BatchPlanItem<ManualSuppressionFields>, { kind: 'add' }> => p.kind === 'add');
  const outcome = new Map<number, 'created' | 'exists'>();
  // The active add of every address answered, this call's or an earlier one's (a retry after a call
  // cut short, a racing single add): as the single add's 200, `exists` waits until it is shown too.
  const active: string[] = [];
  await eachLimited(toAdd, SUPPRESSION_BATCH_LIMITS.parallelAppends, async (p) => {
    const { created, add } = await decideAndAppendAdd(deps, tenantId, actor, p.item);
    active.push(add.id);
    outcome.set(p.index, created ? 'created' : 'exists');
  });
  await awaitManualAdds(deps, 'suppression.add_batch', active, BATCH_READ_MODEL_WAIT_MS);

  const items = plan.map((p): SuppressionBatchItem => {
    if (p.kind === 'invalid') return { index: p.index, email: p.email, status: 'invalid', error: p.error };
    return { index: p.index, email: p.email, status: p.kind === 'duplicate' ? 'duplicate' : outcome.get(p.index)!, id: suppressionIdOf(tenantId, p.email) };
  });
  const n = (status: SuppressionBatchItem['status']) => items.filter((i) => i.status === status).length;
  return { created: n('created'), existing: n('exists'), invalid: n('invalid'), duplicates: n('duplicate'), items };
}

/**
 * The add of the single route and the batch: decided on the suppression's stream with `decideAdd`
 * and appended at the revision read; a conflict (another add or a lift of this very address)
 * decides again, up to MAX_ATTEMPTS (then 409 suppression_conflict). `add` is the event appended
 * (`created`), or the add that is active already (nothing appended).
 */
async function decideAndAppendAdd(
  deps: SuppressionDeps, tenantId: string, actor: string, { email, note }: ManualSuppressionFields,
): Promise<{ created: boolean; add: { id: string; data: SuppressionAdded } }> {
  const id = suppressionIdOf(tenantId, email);
  const d = await decideOnStream(deps.store, streamName('suppression', id), {
    actor, attempts: MAX_ATTEMPTS,
    exhausted: () => fail('suppression_conflict', 409, 'This address\'s suppression changed too often while the request was handled', { nextAction: 'Retry the request' }),
  }, (recorded) => decideAdd(fold(streamEvents(recorded)), { suppressionId: id, tenantId, email, note, now: deps.clock.now() }));
  if (d.appended.length === 0) {
    const active = d.recorded.findLast((e) => e.type === 'SuppressionAdded') as RecordedEvent<'SuppressionAdded', SuppressionAdded>;
    return { created: false, add: { id: active.id, data: active.data } };
  }
  const added = d.written[d.written.length - 1];
  return { created: true, add: { id: added.id, data: added.data as SuppressionAdded } };
}

/**
 * Read-your-writes for an add: the record once the projection has applied the add (its row in
 * `manual_adds`). A projector that did not get there in time: the record the add alone makes
 * (the write is committed; the next GET shows the whole row once the projector catches up).
 */
async function recordOnceShown(deps: ReadYourWritesDeps, eventId: string, added: SuppressionAdded): Promise<SuppressionView> {
  const shown = await awaitManualAdds(deps, 'suppression.add', [eventId], READ_MODEL_WAIT_MS);
  // Not shown yet: a row there is from before the add (a hard bounce's, say), not what the add made.
  return (shown ? await getSuppression(deps.db, added.tenantId, added.suppressionId) : null) ?? {
    id: added.suppressionId, email: added.email, reason: 'manual', count: 1, first_at: added.addedAt, last_at: added.addedAt,
    last_message_id: null, last_motor_block_id: null, smtp_code: null, enhanced_code: null, note: added.note,
  };
}

/**
 * Until the projection has applied every one of these adds (their rows in `manual_adds`; the
 * `suppressions` rows are recomputed in the same transaction). One query per poll for the adds
 * not shown yet, never a query per add. False when `timeoutMs` passed first.
 */
function awaitManualAdds(deps: ReadYourWritesDeps, wait: string, eventIds: readonly string[], timeoutMs: number): Promise<boolean> {
  return awaitRows(deps, wait, { schema: SUPPRESSIONS_SCHEMA, table: 'manual_adds', key: 'event_id', rows: new Map(eventIds.map((id) => [id, null])) }, timeoutMs);
}

export async function liftSuppression(deps: SuppressionDeps, tenantId: string, actor: string, givenId: string): Promise<{ id: string; email: string; lifted: true }> {
  const id = givenId.toLowerCase(); // an id written in capitals is the same suppression, as list, contact and campaign ids are
  const current = await getSuppression(deps.db, tenantId, id);
  if (!current) throw fail('suppression_not_found', 404, 'No such suppression for this tenant');
  if (!LIFTABLE_REASONS.includes(current.reason)) {
    throw fail('suppression_not_liftable', 409, `A suppression for ${current.reason === 'complaint' ? 'a complaint' : 'an unsubscribe'} is the recipient's decision and cannot be lifted`, {
      details: { reason: current.reason },
      nextAction: 'Only the recipient can undo it (by subscribing again); hard bounces and manual suppressions alone can be lifted',
    });
  }
  const eventId = newId();
  await deps.store.append(streamName('suppression', id), [toEventData(eventId, {
    type: 'SuppressionLifted', data: { suppressionId: id, tenantId, email: current.email, liftedAt: deps.clock.now().toISOString() },
  }, { actor })], { expectedRevision: 'any' });
  await awaitLift(deps, eventId);
  return { id, email: current.email, lifted: true };
}

/** Read-your-writes: until the projection has applied the lift (its row in `lifts`), so the next GET no longer lists the address. */
function awaitLift(deps: ReadYourWritesDeps, eventId: string): Promise<boolean> {
  return awaitRows(deps, 'suppression.lift', { schema: SUPPRESSIONS_SCHEMA, table: 'lifts', key: 'event_id', rows: new Map([[eventId, null]]) }, READ_MODEL_WAIT_MS);
}
