import { storableText } from '../../domain/storableJson';

/**
 * The bodies of `message/delivery-status` (RFC 3464) and `message/feedback-report` (RFC 5965):
 * blocks of header-like fields separated by blank lines. They come from any MTA on the Internet,
 * so everything here is lenient about what it reads and strict about what it keeps: folded lines
 * are unfolded, field names are case-insensitive, RFC 5322 comments are removed from structured
 * values, lines that are no field are skipped, and sizes are capped. Nothing throws.
 */

/** Field name (lower case) → its values in order (a field may repeat, e.g. Original-Rcpt-To). */
export type FieldBlock = Map<string, string[]>;

const MAX_BLOCKS = 1000;
const MAX_VALUE = 4000;
const FIELD_RE = /^([!-9;-~]+)[ \t]*:(.*)$/;

export function parseFieldBlocks(text: string): FieldBlock[] {
  const blocks: FieldBlock[] = [];
  let block: FieldBlock = new Map();
  let last: { name: string; index: number } | null = null;
  const end = () => {
    if (block.size > 0) blocks.push(block);
    block = new Map();
    last = null;
  };
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (blocks.length >= MAX_BLOCKS) break;
    if (line.trim() === '') {
      end();
      continue;
    }
    if (line[0] === ' ' || line[0] === '\t') {
      // A continuation of the field above; one with no field above is dropped.
      if (last) {
        const values = block.get(last.name)!;
        values[last.index] = `${values[last.index]} ${line.trim()}`.slice(0, MAX_VALUE);
      }
      continue;
    }
    const m = FIELD_RE.exec(line);
    if (!m) {
      last = null;
      continue;
    }
    const name = m[1].toLowerCase();
    const values = block.get(name) ?? [];
    values.push(m[2].trim().slice(0, MAX_VALUE));
    block.set(name, values);
    last = { name, index: values.length - 1 };
  }
  end();
  return blocks;
}

export const field = (block: FieldBlock, name: string): string | null => block.get(name)?.[0] ?? null;

/** A structured value without its comments (`(...)`, nested, outside quoted strings), spaces collapsed. */
export function stripComments(value: string): string {
  let out = '';
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (c === '\\' && (quoted || depth > 0)) {
      if (depth === 0) out += value.slice(i, i + 2);
      i++;
    } else if (quoted) {
      out += c;
      if (c === '"') quoted = false;
    } else if (c === '(') depth++;
    else if (c === ')' && depth > 0) depth--;
    else if (depth === 0) {
      if (c === '"') quoted = true;
      out += c;
    }
  }
  return out.replace(/\s+/g, ' ').trim();
}

const ADDRESS_RE = /^[^\s@<>()",;]+@[^\s@<>()",;[\]]+$/;

/**
 * The address of `rfc822; user@example.com` (Final-Recipient, Original-Recipient; RFC 6533's
 * `utf-8;` too), or of a bare `<user@example.com>` (Original-Rcpt-To, Original-Mail-From), lower
 * case on the domain; null when there is no plausible address.
 */
export function typedAddress(value: string | null): string | null {
  if (value === null) return null;
  let v = stripComments(value);
  const semi = v.indexOf(';');
  if (semi >= 0) {
    const type = v.slice(0, semi).trim().toLowerCase();
    if (type !== 'rfc822' && type !== 'utf-8') return null;
    v = v.slice(semi + 1).trim();
  }
  v = v.replace(/^<(.*)>$/, '$1').trim();
  if (!ADDRESS_RE.test(v)) return null;
  const at = v.lastIndexOf('@');
  return `${v.slice(0, at)}@${v.slice(at + 1).toLowerCase()}`;
}

/** RFC 3463 status of a `Status:` field (`5.1.1`, comments and text after it ignored), or null. */
export function statusCode(value: string | null): string | null {
  if (value === null) return null;
  const m = /^([245])\.(\d{1,3})\.(\d{1,3})(?!\d)/.exec(stripComments(value));
  return m ? `${m[1]}.${m[2]}.${m[3]}` : null;
}

export interface Diagnostic {
  /** The SMTP reply code when the diagnostic type is smtp and starts with one. */
  smtpCode: string | null;
  enhancedCode: string | null;
  /** The diagnostic text after its type (`550 5.1.1 User unknown`), capped. */
  text: string;
}

/** `Diagnostic-Code: smtp; 550 5.1.1 User unknown` (any type; only smtp gives a reply code). */
export function diagnostic(value: string | null): Diagnostic | null {
  if (value === null) return null;
  const semi = value.indexOf(';');
  const type = semi >= 0 ? value.slice(0, semi).trim().toLowerCase() : '';
  const text = storableText((semi >= 0 ? value.slice(semi + 1) : value).trim(), MAX_VALUE);
  if (text === '') return null;
  const m = type === 'smtp' ? /^([245]\d\d)(?:[ -]+([245]\.\d{1,3}\.\d{1,3})(?![\d.]))?/.exec(text) : null;
  return { smtpCode: m?.[1] ?? null, enhancedCode: m?.[2] ?? null, text };
}

/** The host of `dns; mx.example.com` (Remote-MTA, Reporting-MTA), or null. */
export function mtaName(value: string | null): string | null {
  if (value === null) return null;
  const v = stripComments(value);
  const semi = v.indexOf(';');
  const host = (semi >= 0 ? v.slice(semi + 1) : v).trim().toLowerCase();
  return /^[a-z0-9.:[\]-]{1,255}$/.test(host) ? host : null;
}

// ------------------------------------------------------------------------ delivery status (RFC 3464)

export interface DsnRecipient {
  /** Original-Recipient, when it names an address. */
  originalRecipient: string | null;
  /** Final-Recipient, when it names an address. */
  finalRecipient: string | null;
  /** failed, delayed, delivered, relayed, expanded (lower case), or null when absent. */
  action: string | null;
  enhancedCode: string | null;
  smtpCode: string | null;
  smtpResponse: string | null;
  remoteMta: string | null;
}

/**
 * The per-recipient blocks of a delivery-status body. The per-message block comes first (RFC
 * 3464 §2.2); a block is taken for a recipient's when it has Final-Recipient, Original-Recipient
 * or Action, so a report without the per-message block still reads.
 */
export function readDeliveryStatus(text: string): DsnRecipient[] {
  const recipients: DsnRecipient[] = [];
  for (const b of parseFieldBlocks(text)) {
    if (!b.has('final-recipient') && !b.has('original-recipient') && !b.has('action')) continue;
    const action = field(b, 'action');
    const diag = diagnostic(field(b, 'diagnostic-code'));
    recipients.push({
      originalRecipient: typedAddress(field(b, 'original-recipient')),
      finalRecipient: typedAddress(field(b, 'final-recipient')),
      action: action === null ? null : stripComments(action).toLowerCase() || null,
      enhancedCode: statusCode(field(b, 'status')) ?? diag?.enhancedCode ?? null,
      smtpCode: diag?.smtpCode ?? null,
      smtpResponse: diag?.text ?? null,
      remoteMta: mtaName(field(b, 'remote-mta')),
    });
  }
  return recipients;
}

// ------------------------------------------------------------------------ feedback report (RFC 5965)

export interface FeedbackReport {
  /** abuse, fraud, virus, other, not-spam... (lower case); null when absent. */
  feedbackType: string | null;
  /** Every Original-Rcpt-To naming an address (redacted ones do not). */
  originalRcptTo: string[];
  /** Original-Mail-From, when it names an address. */
  originalMailFrom: string | null;
}

export function readFeedbackReport(text: string): FeedbackReport {
  // The report is one block; a stray blank line must not hide fields, so all blocks are read.
  const fields: FieldBlock = new Map();
  for (const b of parseFieldBlocks(text)) for (const [k, v] of b) fields.set(k, [...(fields.get(k) ?? []), ...v]);
  const type = field(fields, 'feedback-type');
  const feedbackType = type === null ? null : stripComments(type).toLowerCase();
  return {
    feedbackType: feedbackType && /^[a-z0-9][a-z0-9_.-]{0,63}$/.test(feedbackType) ? feedbackType : null,
    originalRcptTo: (fields.get('original-rcpt-to') ?? []).map(typedAddress).filter((a): a is string => a !== null),
    originalMailFrom: typedAddress(field(fields, 'original-mail-from')),
  };
}
