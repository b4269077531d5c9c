import { domainToASCII } from 'node:url';
import { fail } from '../errors';

/**
 * The rules of a send request that need nothing but the request itself: shape, addresses,
 * fromName, custom headers, body size. Shared by POST /v1/send (JSON) and, where they apply, by
 * SMTP submission. Pure: no I/O, no clock.
 */

export const MAX_FROM_NAME = 78;
export const MAX_RECIPIENTS = 50;
export const MAX_SUBJECT = 998;
/** Text + HTML + custom headers, in bytes. */
export const MAX_BODY_BYTES = 10 * 1024 * 1024;
export const MAX_CUSTOM_HEADERS = 50;

/** Header names the service owns: a custom header of these names is refused (DISALLOWED_HEADERS). */
const RESERVED_EXACT = new Set([
  'from', 'sender', 'return-path', 'to', 'cc', 'bcc', 'subject', 'date', 'message-id', 'mime-version',
  'dkim-signature', 'received', 'authentication-results',
]);
const RESERVED_PREFIXES = ['content-', 'arc-', 'x-service-'];

export function isReservedHeader(name: string): boolean {
  const n = name.trim().toLowerCase();
  return RESERVED_EXACT.has(n) || RESERVED_PREFIXES.some((p) => n.startsWith(p));
}

/**
 * A custom header's name: an RFC 5322 field-name (printable US-ASCII except colon) without ';',
 * which DKIM's h= tag cannot list (custom headers are signed), and at most 100 characters (the
 * field must fit a 998-character line).
 */
const HEADER_NAME_RE = /^[\x21-\x39\x3c-\x7e]{1,100}$/;

// A pragmatic addr-spec check (dot-atom local part or quoted string, domain of LDH labels, or an
// IP literal). Full RFC 5321/5322 validation with DNS lives in the email-validation service.
const LOCAL_ATOM = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\u0080-\\uFFFF-]+";
const LOCAL_RE = new RegExp(`^(${LOCAL_ATOM}(\\.${LOCAL_ATOM})*|"([\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\x20-\\x7e])*")$`, 'u');
const LABEL_RE = /^(?!-)[A-Za-z0-9\u0080-\uFFFF-]{1,63}(?<!-)$/u;

export function isValidAddress(addr: string): boolean {
  if (addr.length > 254 || /[\r\n\s<>]/.test(addr.replace(/"[^"]*"/g, ''))) return false;
  const at = addr.lastIndexOf('@');
  if (at <= 0 || at === addr.length - 1) return false;
  const local = addr.slice(0, at);
  const domain = addr.slice(at + 1);
  if (Buffer.byteLength(local) > 64 || !LOCAL_RE.test(local)) return false;
  if (/^\[(\d{1,3}\.){3}\d{1,3}\]$/.test(domain)) return true;
  const labels = domain.split('.');
  if (!(labels.length >= 2 && labels.every((l) => LABEL_RE.test(l)) && !/^\d+$/.test(labels[labels.length - 1]))) return false;
  // An internationalized domain is delivered in its A-labels (workers/delivery/mx.ts): it must have
  // them (IDNA: `⒈.test` has none, `\u00ad.test` maps to an empty label), or it would go out as
  // raw UTF-8 that no resolver or MX understands.
  if (/^[\x00-\x7f]*$/.test(domain)) return true;
  const ascii = domainToASCII(domain).split('.');
  return ascii.length === labels.length && ascii.every((l) => ASCII_LABEL_RE.test(l));
}

const ASCII_LABEL_RE = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;

export const domainOf = (addr: string): string => addr.slice(addr.lastIndexOf('@') + 1).toLowerCase();

/** The raw JSON body of POST /v1/send, as received (nothing trusted yet). */
export interface SendRequestBody {
  from?: unknown; fromName?: unknown; to?: unknown; subject?: unknown;
  text?: unknown; html?: unknown; headers?: unknown; dryRun?: unknown; metadata?: unknown;
}

/** A send request that passed every request-level rule. */
export interface ValidSendRequest {
  from: string;
  fromName: string | null;
  to: string[];
  subject: string;
  text: string | null;
  html: string | null;
  headers: Record<string, string>;
  metadata: Record<string, string>;
  dryRun: boolean;
  bodySize: number;
}

const validation = (message: string, field?: string) =>
  fail('validation_error', 422, message, { details: field ? { field } : undefined });

/**
 * Validates the request body in the order the spec lists the send errors: missing or malformed
 * fields (422) and disallowed headers (400). Throws the first DomainError found.
 */
export function validateSendRequest(body: SendRequestBody): ValidSendRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw validation('Request body must be a JSON object');
  const { from, fromName, to, subject, text, html, headers, dryRun, metadata } = body;

  if (typeof from !== 'string' || from.trim() === '') throw validation('from is required', 'from');
  if (/[<>]/.test(from) || !isValidAddress(from.trim())) {
    throw validation('from must be a bare email address without a display name (use fromName)', 'from');
  }

  let name: string | null = null;
  if (fromName !== undefined && fromName !== null) {
    if (typeof fromName !== 'string') throw validation('fromName must be a string', 'fromName');
    if ([...fromName].length > MAX_FROM_NAME) throw validation(`fromName must be at most ${MAX_FROM_NAME} characters`, 'fromName');
    if (/[\r\n]/.test(fromName)) throw validation('fromName must not contain line breaks', 'fromName');
    name = fromName.trim() === '' ? null : fromName;
  }

  const list = typeof to === 'string' ? [to] : to;
  if (!Array.isArray(list) || list.length === 0) throw validation('to is required (an address or a non-empty array of addresses)', 'to');
  if (list.length > MAX_RECIPIENTS) throw validation(`to accepts at most ${MAX_RECIPIENTS} recipients`, 'to');
  const recipients: string[] = [];
  const seen = new Set<string>();
  for (const r of list) {
    if (typeof r !== 'string' || !isValidAddress(r.trim())) throw validation(`to contains an invalid address: ${String(r).slice(0, 254)}`, 'to');
    const addr = r.trim();
    const key = addr.toLowerCase();
    if (!seen.has(key)) {
      seen.add(key);
      recipients.push(addr);
    }
  }

  if (typeof subject !== 'string' || subject.trim() === '') throw validation('subject is required', 'subject');
  if (subject.length > MAX_SUBJECT) throw validation(`subject must be at most ${MAX_SUBJECT} characters`, 'subject');
  if (/[\r\n]/.test(subject)) throw validation('subject must not contain line breaks', 'subject');

  if (text !== undefined && text !== null && typeof text !== 'string') throw validation('text must be a string', 'text');
  if (html !== undefined && html !== null && typeof html !== 'string') throw validation('html must be a string', 'html');
  const textBody = typeof text === 'string' && text !== '' ? text : null;
  const htmlBody = typeof html === 'string' && html !== '' ? html : null;
  if (textBody === null && htmlBody === null) throw validation('one of text or html is required', 'text');

  if (dryRun !== undefined && typeof dryRun !== 'boolean') throw validation('dryRun must be a boolean', 'dryRun');

  const custom: Record<string, string> = {};
  if (headers !== undefined && headers !== null) {
    if (typeof headers !== 'object' || Array.isArray(headers)) throw validation('headers must be an object of header names to string values', 'headers');
    const entries = Object.entries(headers as Record<string, unknown>);
    if (entries.length > MAX_CUSTOM_HEADERS) throw validation(`at most ${MAX_CUSTOM_HEADERS} custom headers`, 'headers');
    const disallowed: string[] = [];
    for (const [k, v] of entries) {
      if (typeof v !== 'string') throw validation(`header ${k} must have a string value`, 'headers');
      if (!HEADER_NAME_RE.test(k) || k === '__proto__') throw validation(`header name ${JSON.stringify(k)} is not a valid field name (printable ASCII without ':' or ';', at most 100 characters)`, 'headers');
      if (isReservedHeader(k) || /[\r\n]/.test(v)) disallowed.push(k);
      else custom[k] = v;
    }
    if (disallowed.length > 0) {
      throw fail('DISALLOWED_HEADERS', 400, `Custom headers not allowed: ${disallowed.join(', ')} (reserved name, or CR/LF in the value)`, {
        details: { headers: disallowed },
      });
    }
  }

  const meta: Record<string, string> = {};
  if (metadata !== undefined && metadata !== null) {
    if (typeof metadata !== 'object' || Array.isArray(metadata)) throw validation('metadata must be an object of string values', 'metadata');
    const entries = Object.entries(metadata as Record<string, unknown>);
    if (entries.length > 20) throw validation('metadata accepts at most 20 keys', 'metadata');
    for (const [k, v] of entries) {
      // __proto__ matches the pattern, but assigning it sets the object's prototype: the key was silently dropped.
      if (!/^[A-Za-z0-9_.-]{1,64}$/.test(k) || k === '__proto__') throw validation(`metadata key ${JSON.stringify(k)} must match [A-Za-z0-9_.-]{1,64} (and not be __proto__)`, 'metadata');
      if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') throw validation(`metadata.${k} must be a string, number or boolean`, 'metadata');
      const s = String(v);
      if (s.length > 256) throw validation(`metadata.${k} must be at most 256 characters`, 'metadata');
      meta[k] = s;
    }
  }

  const bodySize =
    Buffer.byteLength(textBody ?? '') + Buffer.byteLength(htmlBody ?? '') +
    Object.entries(custom).reduce((n, [k, v]) => n + k.length + Buffer.byteLength(v) + 4, 0);
  if (bodySize > MAX_BODY_BYTES) throw validation(`message body exceeds ${MAX_BODY_BYTES} bytes`, 'text');

  return { from: from.trim(), fromName: name, to: recipients, subject, text: textBody, html: htmlBody, headers: custom, metadata: meta, dryRun: dryRun === true, bodySize };
}
