import { domainToASCII } from 'node:url';
import type { DomainEvent } from '../events';
import type { MessageState } from './message';

/**
 * Deciders for what recipients' mail systems report after delivery (docs/DELIVERY.md
 * "Asynchronous bounces and complaints"): a delivery status notification that a recipient
 * failed, and a feedback-loop complaint. Pure: the inbound listener parses the report, folds the
 * message's stream and appends what these return.
 */

const key = (address: string): string => address.toLowerCase();

/** The same address with its domain in A-labels (a report names `xn--bcher-kva.example` for `bücher.example`). */
function asciiKey(address: string): string {
  const at = address.lastIndexOf('@');
  if (at < 0) return key(address);
  const domain = domainToASCII(address.slice(at + 1).toLowerCase());
  return key(`${address.slice(0, at)}@${domain || address.slice(at + 1)}`);
}

/**
 * The message's recipient (as addressed) that a reported address names, or null. The whole
 * address is compared case-insensitively, domain in U- or A-labels: the message aggregate keys
 * its recipients the same way (a local part differing only in case is the same recipient).
 */
export function recipientNamed(state: MessageState, address: string): string | null {
  if (state.status !== 'accepted') return null;
  const wanted = asciiKey(address);
  return state.accepted.to.find((r) => key(r) === key(address) || asciiKey(r) === wanted) ?? null;
}

export type ReportVerdict<T extends 'DeliveryBounced' | 'ComplaintReceived'> =
  | { kind: 'record'; event: DomainEvent<T> }
  | { kind: 'ignore'; reason: 'no_message' | 'unknown_recipient' | 'ambiguous_recipient' | 'already_final' | 'already_complained' };

export interface RecordBounceReport {
  /** Original-Recipient then Final-Recipient: the first that names a recipient of the message counts. */
  addresses: (string | null)[];
  smtpCode: string | null;
  enhancedCode: string | null;
  smtpResponse: string | null;
  remoteMta: string | null;
  now: Date;
}

/**
 * A DSN's `Action: failed` for a recipient: bounced, unless the recipient already ended in
 * another way than delivered (bounced or failed during delivery, complained). A recipient still
 * in flight or deferred is bounced too: the report says its mail cannot be delivered.
 */
export function recordBounceReport(state: MessageState, cmd: RecordBounceReport): ReportVerdict<'DeliveryBounced'> {
  if (state.status !== 'accepted') return { kind: 'ignore', reason: 'no_message' };
  const recipient = cmd.addresses.map((a) => (a === null ? null : recipientNamed(state, a))).find((r) => r !== null) ?? null;
  if (recipient === null) return { kind: 'ignore', reason: 'unknown_recipient' };
  const current = state.recipients[key(recipient)];
  if (current.terminal && current.outcome !== 'delivered') return { kind: 'ignore', reason: 'already_final' };
  return {
    kind: 'record',
    event: {
      type: 'DeliveryBounced',
      data: {
        messageId: state.accepted.messageId, recipient, at: cmd.now.toISOString(), attempt: Math.max(current.attempts, 1),
        smtpCode: cmd.smtpCode, smtpResponse: cmd.smtpResponse, enhancedCode: cmd.enhancedCode, mx: cmd.remoteMta, asynchronous: true,
      },
    },
  };
}

export interface RecordComplaint {
  /** The report's Original-Rcpt-To addresses (none when the provider redacts them). */
  originalRcptTo: string[];
  feedbackType: string | null;
  now: Date;
}

/**
 * A feedback-loop report: complained, for the recipient its Original-Rcpt-To names; when it names
 * none (redacted, as most providers do) and the message had exactly one recipient, that one.
 * Several recipients named, or none and several recipients: which one complained cannot be told,
 * so nothing is recorded. A complaint after delivered is allowed and wins (docs/PROJECTIONS.md).
 */
export function recordComplaint(state: MessageState, cmd: RecordComplaint): ReportVerdict<'ComplaintReceived'> {
  if (state.status !== 'accepted') return { kind: 'ignore', reason: 'no_message' };
  const named = [...new Set(cmd.originalRcptTo.map((a) => recipientNamed(state, a)).filter((r): r is string => r !== null))];
  let recipient: string;
  if (named.length === 1) recipient = named[0];
  else if (named.length > 1) return { kind: 'ignore', reason: 'ambiguous_recipient' };
  else if (cmd.originalRcptTo.length > 0) return { kind: 'ignore', reason: 'unknown_recipient' };
  else if (state.accepted.to.length === 1) recipient = state.accepted.to[0];
  else return { kind: 'ignore', reason: 'ambiguous_recipient' };
  if (state.recipients[key(recipient)].outcome === 'complained') return { kind: 'ignore', reason: 'already_complained' };
  return {
    kind: 'record',
    event: { type: 'ComplaintReceived', data: { messageId: state.accepted.messageId, recipient, at: cmd.now.toISOString(), feedbackType: cmd.feedbackType } },
  };
}
