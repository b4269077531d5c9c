import type { SendResult } from './sendMessage';

// What a send answers, whatever the edge (POST /v1/send, the MCP send_email tool): the data of a
// dry run, and of an accepted send or its idempotent replay.

export interface SendAcceptedData {
  id: string;
  acceptanceStatus: 'queued';
  from: string;
  fromName: string | null;
  to: string[];
  subject: string;
  timestamp: string;
}
export interface DryRunData {
  status: 'validated';
  acceptanceStatus: 'validated';
  from: string;
  fromName: string | null;
  to: string[];
  subject: string;
  domain: string;
  motorBlockId: string;
  /** @isInt */
  bodySize: number;
  hasText: boolean;
  hasHtml: boolean;
  /** @isInt */
  recipientCount: number;
  timestamp: string;
}

/** An accepted send, or the earlier one an Idempotency-Key matched. */
export function acceptedData(result: Extract<SendResult, { kind: 'accepted' | 'replayed' }>): SendAcceptedData {
  if (result.kind === 'replayed') {
    const a = result.accepted;
    return { id: result.messageId, acceptanceStatus: 'queued', from: a.from, fromName: a.fromName, to: a.to, subject: a.subject, timestamp: a.acceptedAt };
  }
  const r = result.request;
  return { id: result.messageId, acceptanceStatus: 'queued', from: r.from, fromName: r.fromName, to: r.to, subject: r.subject, timestamp: result.acceptedAt.toISOString() };
}

/** A dry run that passed every check. */
export function dryRunData(result: Extract<SendResult, { kind: 'validated' }>, now: Date): DryRunData {
  const r = result.request;
  return {
    status: 'validated', acceptanceStatus: 'validated', from: r.from, fromName: r.fromName, to: r.to, subject: r.subject,
    domain: result.domain.name, motorBlockId: result.block.id, bodySize: r.bodySize, hasText: r.text !== null,
    hasHtml: r.html !== null, recipientCount: r.to.length, timestamp: now.toISOString(),
  };
}
