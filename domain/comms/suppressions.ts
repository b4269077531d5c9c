import { createHash } from 'node:crypto';
import { fail } from '../errors';
import type { ComplaintReceived, DeliveryBounced, DomainEvent } from '../events';
import { uuidFromBytes } from '../ids';
import { NOT_ONE_LINE } from '../oneLine';
import { commAddress, requiredAddress } from './address';
import { planBatch, type BatchPlanItem } from './batch';

/**
 * Which recipient outcomes suppress an address (communications, docs/COMMUNICATIONS.md
 * "Suppressions"). Pure: the `commsuppressions` projection applies it to the message outcome
 * events of every block of a tenant.
 *
 * - `hard_bounce`: DeliveryBounced, the receiving MX refused the recipient with a permanent 5xx
 *   reply. A bounce event carrying a 4xx code (the delivery worker never writes one: a 4xx is a
 *   DeliveryDeferred) is treated as soft and suppresses nothing.
 * - `complaint`: ComplaintReceived, the recipient reported the mail as spam (a feedback loop).
 *
 * Nothing else suppresses: a deferral (4xx, a soft bounce) is retried; DeliveryFailed is Motor
 * giving up (lifetime exceeded after deferrals, DNS without a usable MX), not a receiver's verdict
 * on the mailbox.
 */

/**
 * `unsubscribed`: a contact used its unsubscribe link (ContactUnsubscribed; docs/COMMUNICATIONS.md
 * "Unsubscribe"). `manual`: the tenant suppressed the address itself (SuppressionAdded, below).
 */
export type SuppressionReason = 'hard_bounce' | 'complaint' | 'unsubscribed' | 'manual';
export const SUPPRESSION_REASONS: readonly SuppressionReason[] = ['hard_bounce', 'complaint', 'unsubscribed', 'manual'];
export const SUPPRESSING_EVENT_TYPES = ['DeliveryBounced', 'ComplaintReceived'] as const;

export interface SuppressionFact {
  messageId: string;
  /** The address lower-cased whole (see suppressionAddress). */
  email: string;
  reason: 'hard_bounce' | 'complaint';
  at: Date;
  smtpCode: string | null;
  enhancedCode: string | null;
}

/**
 * The address a suppression is kept under: trimmed and lower-cased whole. The local part is
 * case-sensitive by RFC 5321, but mailbox providers treat it case-insensitively, and a suppression
 * list errs on the side of not mailing.
 */
export const suppressionAddress = commAddress;

const validDate = (v: unknown): Date | null => {
  if (typeof v !== 'string') return null;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d;
};

/** The suppression an outcome event records, or null (another type, a soft bounce, or malformed data). */
export function suppressionFactOf(event: { type: string; data: unknown }): SuppressionFact | null {
  if (event.type !== 'DeliveryBounced' && event.type !== 'ComplaintReceived') return null;
  const d = event.data as Partial<DeliveryBounced & ComplaintReceived> | null;
  const at = validDate(d?.at);
  if (!d || typeof d.messageId !== 'string' || typeof d.recipient !== 'string' || at === null) return null;
  const email = suppressionAddress(d.recipient);
  if (email === '') return null;
  if (event.type === 'ComplaintReceived') return { messageId: d.messageId, email, reason: 'complaint', at, smtpCode: null, enhancedCode: null };
  const smtpCode = typeof d.smtpCode === 'string' && d.smtpCode !== '' ? d.smtpCode : null;
  if (smtpCode !== null && !smtpCode.startsWith('5')) return null;
  return { messageId: d.messageId, email, reason: 'hard_bounce', at, smtpCode, enhancedCode: typeof d.enhancedCode === 'string' && d.enhancedCode !== '' ? d.enhancedCode : null };
}

/**
 * Hard bounces and the tenant's own manual suppressions can be lifted (the tenant's decision is the
 * tenant's to undo); a complaint and an unsubscribe are the recipient's own decision (docs/COMMUNICATIONS.md).
 */
export const LIFTABLE_REASONS: readonly SuppressionReason[] = ['hard_bounce', 'manual'];

/**
 * The id of the tenant's suppression of an address: the uuid spelling of md5('suppression:<tenant>:<address>'),
 * the same the read model computes in SQL (projections/commSuppressions/projection.ts), so the
 * stream `suppression-<id>` and the row are named alike whatever happens to the row.
 */
export const suppressionIdOf = (tenantId: string, email: string): string =>
  uuidFromBytes(createHash('md5').update(`suppression:${tenantId.toLowerCase()}:${suppressionAddress(email)}`, 'utf8').digest());

// ---------------------------------------------------------------- the suppression stream (manual adds and lifts)
/**
 * The stream `suppression-<id>` holds what the tenant itself decided about one address:
 * SuppressionAdded (a manual suppression) and SuppressionLifted. A manual suppression is active from
 * its add until the next lift on the stream; the read model applies the same rule by stream revision.
 */
export type SuppressionStreamEvent = DomainEvent<'SuppressionAdded' | 'SuppressionLifted'>;
export const SUPPRESSION_STREAM_EVENT_TYPES = ['SuppressionAdded', 'SuppressionLifted'] as const;

export interface ManualSuppressionState { active: boolean }

export function evolve(state: ManualSuppressionState, event: SuppressionStreamEvent): ManualSuppressionState {
  switch (event.type) {
    case 'SuppressionAdded':
      return { active: true };
    case 'SuppressionLifted':
      return { active: false };
  }
}

export const fold = (events: Iterable<SuppressionStreamEvent>): ManualSuppressionState => {
  let s: ManualSuppressionState = { active: false };
  for (const e of events) s = evolve(s, e);
  return s;
};

export const MANUAL_SUPPRESSION_LIMITS = { noteMax: 500 } as const;

export interface ManualSuppressionFields { email: string; note: string | null }

/**
 * One import (`POST /suppressions/batch`, docs/COMMUNICATIONS.md "Importing suppressions"): the
 * contacts batch's limits, at most `maxItems` addresses per call and at most `parallelAppends` of
 * their streams read and appended at once.
 */
export const SUPPRESSION_BATCH_LIMITS = { maxItems: 1_000, parallelAppends: 16 } as const;

const invalidField = (field: string, message: string) => fail('validation_error', 400, message, { details: { field } });

/** The fields of `POST /suppressions`, checked and normalised (400 validation_error with `field`). */
export function manualSuppressionFields(body: unknown): ManualSuppressionFields {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw fail('validation_error', 400, 'The body must be a JSON object');
  const b = body as Record<string, unknown>;
  const email = requiredAddress(b.email);
  return { email, note: b.note === undefined || b.note === null ? null : manualNote(b.note) };
}

/** A note: trimmed, at most noteMax characters (code points), one line; empty is none. */
function manualNote(value: unknown): string | null {
  if (typeof value !== 'string') throw invalidField('note', 'note must be a string');
  const n = value.trim();
  if ([...n].length > MANUAL_SUPPRESSION_LIMITS.noteMax) throw invalidField('note', `note is longer than ${MANUAL_SUPPRESSION_LIMITS.noteMax} characters`);
  if (NOT_ONE_LINE.test(n)) throw invalidField('note', 'note cannot contain control characters or line breaks');
  return n === '' ? null : n;
}

const BATCH_ITEM_KEYS: readonly string[] = ['email', 'note'];

/**
 * The items of `{suppressions: [...]}` (`planBatch`, as the contacts batch): each checked by
 * `manualSuppressionFields` exactly as `POST /suppressions`, then an address (as stored) already in
 * an earlier valid item marked `duplicate`. The body itself not `{suppressions: array}` of 1 to
 * maxItems: 400 validation_error (field `suppressions`).
 */
export const planSuppressionBatch = (body: unknown): BatchPlanItem<ManualSuppressionFields>[] =>
  planBatch(body, { key: 'suppressions', noun: 'suppression', itemKeys: BATCH_ITEM_KEYS, maxItems: SUPPRESSION_BATCH_LIMITS.maxItems, fieldsOf: manualSuppressionFields });

/**
 * A manual suppression of the address: one SuppressionAdded, or nothing when one is active already
 * (idempotent: the tenant asked for what is already so).
 */
export function decideAdd(
  state: ManualSuppressionState,
  c: { suppressionId: string; tenantId: string; email: string; note: string | null; now: Date },
): SuppressionStreamEvent[] {
  if (state.active) return [];
  return [{ type: 'SuppressionAdded', data: { suppressionId: c.suppressionId, tenantId: c.tenantId, email: c.email, note: c.note, addedAt: c.now.toISOString() } }];
}
