import type { ComplaintReceived, DeliveryBounced } from '../events';

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

/** `unsubscribed`: a contact used its unsubscribe link (ContactUnsubscribed; docs/COMMUNICATIONS.md "Unsubscribe"). */
export type SuppressionReason = 'hard_bounce' | 'complaint' | 'unsubscribed';
export const SUPPRESSION_REASONS: readonly SuppressionReason[] = ['hard_bounce', 'complaint', 'unsubscribed'];
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
export const suppressionAddress = (address: string): string => address.trim().toLowerCase();

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

/** Only hard bounces can be lifted: a complaint and an unsubscribe are the recipient's own decision (docs/COMMUNICATIONS.md). */
export const LIFTABLE_REASONS: readonly SuppressionReason[] = ['hard_bounce'];
