import { MailParser, type AddressObject } from 'mailparser';

/**
 * From and Subject of a submitted message, decoded exactly as mailparser decodes them (RFC 2047
 * words in any charset, groups, its guards against addresses smuggled in encoded words, punycode
 * domains), without parsing a message: `simpleParser` on the header section cost ~110 µs and
 * ~165 µs of CPU per message (a stream pipeline for two header fields), about a tenth of the SMTP
 * process's work per message.
 *
 * It calls the per-header step of mailparser 3.9.31 (pinned), `processHeaders`, on one reused
 * parser that is never written to. test/smtp/headerValues.unit.test.ts checks the result against
 * `simpleParser` on awkward headers, so an upgrade that changes the step fails there.
 */

interface HeaderLine { key: string; line: string }
interface HeaderStep { processHeaders(lines: HeaderLine[]): Map<string, unknown> }

const parser = new MailParser() as unknown as HeaderStep;

/** mailparser reads a header line as a binary string of the received bytes, without the final CRLF. */
const headerLine = (key: string, raw: string): HeaderLine => ({ key, line: Buffer.from(raw.replace(/\r\n$/, ''), 'utf8').toString('binary') });

/** `fromRaw` / `subjectRaw`: whole fields as received ("From: ...\r\n", folds included); no Subject field: null. */
export function fromAndSubject(fromRaw: string, subjectRaw: string | null): { from: AddressObject | undefined; subject: string | undefined } {
  const lines = [headerLine('from', fromRaw), ...(subjectRaw === null ? [] : [headerLine('subject', subjectRaw)])];
  const headers = parser.processHeaders(lines);
  return { from: headers.get('from') as AddressObject | undefined, subject: headers.get('subject') as string | undefined };
}
