import { simpleParser, type Attachment } from 'mailparser';
import { parseFieldBlocks, field, readDeliveryStatus, readFeedbackReport, typedAddress, type DsnRecipient, type FeedbackReport } from './reportFields';

/**
 * What a message to the bounce domain is: a delivery status notification (RFC 3464), a
 * feedback-loop report (ARF, RFC 5965), or anything else (an auto-reply, a person's reply, a
 * DSN in a private format), which Motor accepts and ignores. mailparser splits the MIME parts;
 * the report bodies are read by reportFields.ts.
 */
export type InboundReport =
  | { kind: 'dsn'; recipients: DsnRecipient[] }
  | (FeedbackReport & {
      kind: 'arf';
      /** Addresses that the reported message was sent from, as its attached headers give them (Return-Path) and Original-Mail-From. */
      returnPaths: string[];
    })
  | { kind: 'other'; why: string };

const DSN_TYPES = ['message/delivery-status', 'message/global-delivery-status'];
const HEADER_PART_TYPES = ['message/rfc822', 'text/rfc822-headers', 'message/rfc822-headers', 'message/global', 'message/global-headers'];

/** The Return-Path of an attached original message or its headers. */
function returnPathOf(part: Attachment): string | null {
  const text = part.content.toString('utf8');
  const head = parseFieldBlocks(text.slice(0, 64 * 1024))[0];
  return head ? typedAddress(field(head, 'return-path')) : null;
}

export async function readReport(raw: Buffer): Promise<InboundReport> {
  // keepDeliveryStatus: a delivery-status part stays a part of its own (mailparser would add it to the text).
  const mail = await simpleParser(raw, { keepDeliveryStatus: true, skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true } as Parameters<typeof simpleParser>[1]);
  const contentType = mail.headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  if (contentType?.value?.toLowerCase() !== 'multipart/report') return { kind: 'other', why: 'not multipart/report' };
  const reportType = (contentType.params?.['report-type'] ?? '').toLowerCase();
  const parts = mail.attachments;
  if (reportType === 'delivery-status' || reportType === 'global-delivery-status') {
    const status = parts.find((p) => DSN_TYPES.includes(p.contentType.toLowerCase()));
    if (!status) return { kind: 'other', why: 'delivery-status report without its delivery-status part' };
    return { kind: 'dsn', recipients: readDeliveryStatus(status.content.toString('utf8')) };
  }
  if (reportType === 'feedback-report') {
    const report = parts.find((p) => p.contentType.toLowerCase() === 'message/feedback-report');
    if (!report) return { kind: 'other', why: 'feedback report without its feedback-report part' };
    const feedback = readFeedbackReport(report.content.toString('utf8'));
    const returnPaths = parts.filter((p) => HEADER_PART_TYPES.includes(p.contentType.toLowerCase())).map(returnPathOf).filter((a): a is string => a !== null);
    if (feedback.originalMailFrom) returnPaths.push(feedback.originalMailFrom);
    return { kind: 'arf', ...feedback, returnPaths };
  }
  return { kind: 'other', why: `report-type ${reportType || 'missing'}` };
}
