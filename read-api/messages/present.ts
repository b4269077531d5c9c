import { maskEmail, maskEmailsInText } from '../../projections/messages';
import type { MessageRecord, RecipientsRecord, TimelineEntry } from '../../projections/messages';

/** Response shapes of the message routes (SPEC "Message", "Per-recipient outcomes"). */

export interface MessageDto {
  id: string;
  motorBlockId: string | null;
  smtpMessageId: string | null;
  currentOutcome: string;
  isTerminal: boolean;
  from: string | null;
  fromName: string | null;
  /** The first recipient (masked unless includePII with logs.pii); see recipientCount for multi-recipient sends. */
  recipient: string | null;
  recipientCount: number;
  subject: string | null;
  queuedAt: string;
  processedAt: string | null;
  deliveredAt: string | null;
  bouncedAt: string | null;
  smtpCode: string | null;
  smtpResponse: string | null;
  metadata: { [key: string]: string };
  source: string | null;
}

export interface RecipientDto {
  recipient: string;
  domain: string;
  outcome: string;
  isTerminal: boolean;
  attempts: number;
  smtpCode: string | null;
  enhancedCode: string | null;
  smtpResponse: string | null;
  mx: string | null;
  lastEventAt: string;
  nextAttemptAt: string | null;
}

export interface RecipientsDto {
  messageId: string;
  recipients: RecipientDto[];
  expectedCount: number;
  allTerminal: boolean;
  pii_masked: boolean;
  pii_unmask_path: string | null;
}

/**
 * One step of the message's collapsed outcome (a multi-recipient send is one timeline, not one per
 * recipient; docs/PROJECTIONS.md "The timeline").
 */
export interface TimelineEventDto {
  /** The event that moved the message to `outcome`. */
  eventId: string;
  /** The event type of this outcome (MessageAccepted … ComplaintReceived). */
  type: string;
  /** The message's outcome from `at` on. */
  outcome: string;
  /** Null on the queued row; otherwise the message's first recipient, as GET /messages/{id} shows it (masked unless includePII with logs.pii). */
  recipient: string | null;
  at: string;
  /** Attempt, reply and next attempt of the latest event that brought a recipient to `outcome`. */
  attempt: number | null;
  /** Reply of that event (null on queued, processed and complained rows). */
  smtpCode: string | null;
  enhancedCode: string | null;
  /** Masked like the addresses unless includePII with logs.pii. */
  smtpResponse: string | null;
  mx: string | null;
  /** Set on a deferred row. */
  nextAttemptAt: string | null;
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);
const addr = (a: string, unmasked: boolean) => (unmasked ? a : maskEmail(a));
/** A receiving server's reply may quote the recipient: masked with the addresses. */
const reply = (text: string | null, unmasked: boolean) => (text === null || unmasked ? text : maskEmailsInText(text));

export function messageDto(m: MessageRecord, unmasked: boolean): MessageDto {
  return {
    id: m.id, motorBlockId: m.motorBlockId, smtpMessageId: m.smtpMessageId, currentOutcome: m.currentOutcome, isTerminal: m.isTerminal,
    from: m.from, fromName: m.fromName, recipient: m.recipients[0] ? addr(m.recipients[0], unmasked) : null, recipientCount: m.expectedCount,
    subject: m.subject, queuedAt: m.queuedAt.toISOString(), processedAt: iso(m.processedAt), deliveredAt: iso(m.deliveredAt), bouncedAt: iso(m.bouncedAt),
    smtpCode: m.smtpCode, smtpResponse: reply(m.smtpResponse, unmasked), metadata: m.metadata, source: m.source,
  };
}

export function recipientsDto(r: RecipientsRecord, unmasked: boolean, unmaskPath: string): RecipientsDto {
  return {
    messageId: r.messageId,
    recipients: r.recipients.map((x) => ({
      recipient: addr(x.recipient, unmasked), domain: x.domain, outcome: x.outcome, isTerminal: x.isTerminal, attempts: x.attempts,
      smtpCode: x.smtpCode, enhancedCode: x.enhancedCode, smtpResponse: reply(x.smtpResponse, unmasked), mx: x.mx,
      lastEventAt: x.lastEventAt.toISOString(), nextAttemptAt: iso(x.nextAttemptAt),
    })),
    expectedCount: r.expectedCount,
    allTerminal: r.allTerminal,
    pii_masked: !unmasked,
    pii_unmask_path: unmasked ? null : unmaskPath,
  };
}

export function timelineDto(entries: TimelineEntry[], unmasked: boolean): TimelineEventDto[] {
  return entries.map((e) => ({
    eventId: e.eventId, type: e.type, outcome: e.outcome, recipient: e.recipient ? addr(e.recipient, unmasked) : null, at: e.at.toISOString(),
    attempt: e.attempt, smtpCode: e.smtpCode, enhancedCode: e.enhancedCode, smtpResponse: reply(e.smtpResponse, unmasked), mx: e.mx, nextAttemptAt: iso(e.nextAttemptAt),
  }));
}
