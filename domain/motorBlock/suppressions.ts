import type { ComplaintReceived, DeliveryBounced } from '../events';
import { uuidV5 } from '../ids';

/**
 * The suppression list of a Motor Block's transactional mail (docs/DELIVERY.md "Suppressions").
 * Pure: the `blocksuppressions` projection applies it to the outcome events of the block's
 * messages; the delivery worker skips the addresses it lists. Kept apart from the communications
 * product's tenant list (domain/comms/suppressions.ts): that one stops campaigns across an
 * account, this one stops a block's own sends, and its rules for a hard bounce are narrower.
 *
 * What suppresses:
 * - `hard_bounce`: a DeliveryBounced (synchronous or asynchronous) whose reply says the address
 *   itself is bad: enhanced status 5.1.x (bad mailbox, domain or address; null MX) or 5.2.1
 *   (mailbox disabled); without an enhanced status, basic code 550, 551 or 553. A full mailbox
 *   (5.2.2), a policy or spam block (5.7.x) or any other 5xx says nothing lasting about the
 *   mailbox: the next message may well arrive, so it is not suppressed.
 * - `complaint`: a ComplaintReceived (a feedback-loop report).
 * Nothing else: a deferral is retried, DeliveryFailed is Motor giving up, not a receiver's verdict.
 */
export type BlockSuppressionReason = 'hard_bounce' | 'complaint';
export const BLOCK_SUPPRESSING_EVENT_TYPES = ['DeliveryBounced', 'ComplaintReceived'] as const;

export interface BlockSuppressionFact {
  messageId: string;
  /** Lower-cased whole (blockSuppressionAddress). */
  address: string;
  reason: BlockSuppressionReason;
  at: Date;
  smtpCode: string | null;
  enhancedCode: string | null;
}

/**
 * The address a suppression is kept under: trimmed and lower-cased whole. RFC 5321 lets the local
 * part be case-sensitive, but mailbox providers do not, and a suppression errs on not mailing.
 */
export const blockSuppressionAddress = (address: string): string => address.trim().toLowerCase();

const HARD_BASIC_CODES: ReadonlySet<string> = new Set(['550', '551', '553']);

/** Whether a bounce's reply says the address itself is bad (see the module comment). */
export function isHardBounce(smtpCode: string | null, enhancedCode: string | null): boolean {
  if (enhancedCode !== null) {
    const [cls, subject, detail] = enhancedCode.split('.');
    return cls === '5' && (subject === '1' || (subject === '2' && detail === '1'));
  }
  return smtpCode !== null && HARD_BASIC_CODES.has(smtpCode);
}

const nonEmpty = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);

/** The suppression an outcome event records, or null (another type, a soft bounce, or malformed data). */
export function blockSuppressionFactOf(event: { type: string; data: unknown }): BlockSuppressionFact | null {
  if (event.type !== 'DeliveryBounced' && event.type !== 'ComplaintReceived') return null;
  const d = event.data as Partial<DeliveryBounced & ComplaintReceived> | null;
  const at = typeof d?.at === 'string' ? new Date(d.at) : null;
  if (!d || typeof d.messageId !== 'string' || typeof d.recipient !== 'string' || at === null || Number.isNaN(at.getTime())) return null;
  const address = blockSuppressionAddress(d.recipient);
  if (address === '') return null;
  if (event.type === 'ComplaintReceived') return { messageId: d.messageId, address, reason: 'complaint', at, smtpCode: null, enhancedCode: null };
  const smtpCode = nonEmpty(d.smtpCode);
  const enhancedCode = nonEmpty(d.enhancedCode);
  if (!isHardBounce(smtpCode, enhancedCode)) return null;
  return { messageId: d.messageId, address, reason: 'hard_bounce', at, smtpCode, enhancedCode };
}

/**
 * The id of a block's suppression of an address, named from both: the stream
 * `blockSuppression-<id>` of its lifts is the same whatever happens to the read-model row.
 */
export const blockSuppressionIdOf = (motorBlockId: string, address: string): string =>
  uuidV5(`blockSuppression:${motorBlockId.toLowerCase()}:${blockSuppressionAddress(address)}`);

/** What the delivery worker records for a suppressed recipient (DeliveryFailed's reason and smtpResponse). */
export const SUPPRESSED_FAILURE_REASON = 'suppressed';
export function suppressedNotice(address: string, reason: BlockSuppressionReason, suppressedAt: Date): string {
  const why = reason === 'complaint' ? 'complaint' : 'hard bounce';
  return `Not sent: ${address} is on this Motor Block's suppression list (${why} on ${suppressedAt.toISOString()}); lift it to send again`;
}
