/** Mapping between the messages read-model tables and the pure view (view.ts). */
import type { MessageView, Outcome, RecipientView, TimelineEntry } from './view.js';

export interface MessageRow {
  id: string;
  accepted: boolean;
  motor_block_id: string | null;
  account_id: string | null;
  domain_id: string | null;
  from_address: string | null;
  from_name: string | null;
  subject: string | null;
  smtp_message_id: string | null;
  recipients: string[];
  recipient_domains: string[];
  expected_count: number;
  current_outcome: string;
  is_terminal: boolean;
  queued_at: Date;
  processed_at: Date | null;
  delivered_at: Date | null;
  bounced_at: Date | null;
  smtp_code: string | null;
  smtp_response: string | null;
  smtp_at: Date | null;
  metadata: Record<string, string>;
  source: string | null;
  updated_at: Date;
  /** Null in rows made before the column (migration 002) until a replay. */
  content_bytes: number | null;
}

export interface RecipientRow {
  message_id: string;
  recipient: string;
  domain: string;
  ordinal: number;
  outcome: string;
  is_terminal: boolean;
  outcome_at: Date;
  attempts: number;
  smtp_code: string | null;
  enhanced_code: string | null;
  smtp_response: string | null;
  mx: string | null;
  reply_at: Date | null;
  last_event_at: Date;
  next_attempt_at: Date | null;
}

export interface EventRow {
  event_id: string;
  message_id: string;
  revision: string | null;
  recipient: string | null;
  type: string;
  outcome: string;
  at: Date;
  attempt: number | null;
  smtp_code: string | null;
  enhanced_code: string | null;
  smtp_response: string | null;
  mx: string | null;
  next_attempt_at: Date | null;
  reason: string | null;
  feedback_type: string | null;
}

export const MESSAGE_COLUMNS = [
  'id', 'accepted', 'motor_block_id', 'account_id', 'domain_id', 'from_address', 'from_name', 'subject', 'smtp_message_id',
  'recipients', 'recipient_domains', 'expected_count', 'current_outcome', 'is_terminal', 'queued_at', 'processed_at',
  'delivered_at', 'bounced_at', 'smtp_code', 'smtp_response', 'smtp_at', 'metadata', 'source', 'updated_at', 'content_bytes',
] as const satisfies readonly (keyof MessageRow)[];

export const RECIPIENT_COLUMNS = [
  'message_id', 'recipient', 'domain', 'ordinal', 'outcome', 'is_terminal', 'outcome_at', 'attempts', 'smtp_code',
  'enhanced_code', 'smtp_response', 'mx', 'reply_at', 'last_event_at', 'next_attempt_at',
] as const satisfies readonly (keyof RecipientRow)[];

export const EVENT_COLUMNS = [
  'event_id', 'message_id', 'revision', 'recipient', 'type', 'outcome', 'at', 'attempt', 'smtp_code', 'enhanced_code',
  'smtp_response', 'mx', 'next_attempt_at', 'reason', 'feedback_type',
] as const satisfies readonly (keyof EventRow)[];

export function recipientFromRow(r: RecipientRow): RecipientView {
  return {
    recipient: r.recipient,
    domain: r.domain,
    ordinal: r.ordinal,
    outcome: r.outcome as Outcome,
    isTerminal: r.is_terminal,
    outcomeAt: r.outcome_at,
    attempts: r.attempts,
    smtpCode: r.smtp_code,
    enhancedCode: r.enhanced_code,
    smtpResponse: r.smtp_response,
    mx: r.mx,
    replyAt: r.reply_at,
    lastEventAt: r.last_event_at,
    nextAttemptAt: r.next_attempt_at,
  };
}

export function viewFromRows(m: MessageRow, recipients: RecipientRow[]): MessageView {
  return {
    id: m.id,
    accepted: m.accepted,
    motorBlockId: m.motor_block_id,
    accountId: m.account_id,
    domainId: m.domain_id,
    from: m.from_address,
    fromName: m.from_name,
    subject: m.subject,
    smtpMessageId: m.smtp_message_id,
    recipients: m.recipients,
    recipientDomains: m.recipient_domains,
    expectedCount: m.expected_count,
    currentOutcome: m.current_outcome as Outcome,
    isTerminal: m.is_terminal,
    queuedAt: m.queued_at,
    processedAt: m.processed_at,
    deliveredAt: m.delivered_at,
    bouncedAt: m.bounced_at,
    smtpCode: m.smtp_code,
    smtpResponse: m.smtp_response,
    smtpAt: m.smtp_at,
    metadata: m.metadata ?? {},
    source: (m.source as MessageView['source']) ?? null,
    contentBytes: m.content_bytes ?? null,
    updatedAt: m.updated_at,
    recipientStates: recipients.map(recipientFromRow).sort((a, b) => a.ordinal - b.ordinal),
  };
}

export function messageRowOf(v: MessageView): MessageRow {
  return {
    id: v.id,
    accepted: v.accepted,
    motor_block_id: v.motorBlockId,
    account_id: v.accountId,
    domain_id: v.domainId,
    from_address: v.from,
    from_name: v.fromName,
    subject: v.subject,
    smtp_message_id: v.smtpMessageId,
    recipients: v.recipients,
    recipient_domains: v.recipientDomains,
    expected_count: v.expectedCount,
    current_outcome: v.currentOutcome,
    is_terminal: v.isTerminal,
    queued_at: v.queuedAt,
    processed_at: v.processedAt,
    delivered_at: v.deliveredAt,
    bounced_at: v.bouncedAt,
    smtp_code: v.smtpCode,
    smtp_response: v.smtpResponse,
    smtp_at: v.smtpAt,
    metadata: v.metadata,
    source: v.source,
    updated_at: v.updatedAt,
    content_bytes: v.contentBytes,
  };
}

export function recipientRowOf(messageId: string, r: RecipientView): RecipientRow {
  return {
    message_id: messageId,
    recipient: r.recipient,
    domain: r.domain,
    ordinal: r.ordinal,
    outcome: r.outcome,
    is_terminal: r.isTerminal,
    outcome_at: r.outcomeAt,
    attempts: r.attempts,
    smtp_code: r.smtpCode,
    enhanced_code: r.enhancedCode,
    smtp_response: r.smtpResponse,
    mx: r.mx,
    reply_at: r.replyAt,
    last_event_at: r.lastEventAt,
    next_attempt_at: r.nextAttemptAt,
  };
}

export function eventRowOf(e: TimelineEntry): EventRow {
  return {
    event_id: e.eventId,
    message_id: e.messageId,
    revision: e.revision === null ? null : e.revision.toString(),
    recipient: e.recipient,
    type: e.type,
    outcome: e.outcome,
    at: e.at,
    attempt: e.attempt,
    smtp_code: e.smtpCode,
    enhanced_code: e.enhancedCode,
    smtp_response: e.smtpResponse,
    mx: e.mx,
    next_attempt_at: e.nextAttemptAt,
    reason: e.reason,
    feedback_type: e.feedbackType,
  };
}

export function timelineFromRow(r: EventRow): TimelineEntry {
  return {
    eventId: r.event_id,
    messageId: r.message_id,
    recipient: r.recipient,
    type: r.type as TimelineEntry['type'],
    outcome: r.outcome as Outcome,
    at: r.at,
    revision: r.revision === null ? null : BigInt(r.revision),
    attempt: r.attempt,
    smtpCode: r.smtp_code,
    enhancedCode: r.enhanced_code,
    smtpResponse: r.smtp_response,
    mx: r.mx,
    nextAttemptAt: r.next_attempt_at,
    reason: r.reason,
    feedbackType: r.feedback_type,
  };
}
