import { fail } from '../domain/errors';

/**
 * The submitted message as the service keeps it: line endings normalized, the header fields the
 * service owns removed, a Message-ID and Date ensured. Pure: the clock and the id generator
 * come in as arguments. Field text the client wrote is kept byte for byte (no re-folding, no
 * re-encoding), so the client's MIME structure is what gets DKIM-signed and delivered.
 */

const CR = 0x0d;
const LF = 0x0a;

/**
 * Bare LF and bare CR become CRLF (Postfix 3.9 `smtpd_forbid_bare_newline = normalize`). The
 * end of DATA is only ever CRLF.CRLF (the parser's rule), so a `\n.\n` inside a message stays
 * content; normalizing it here means the message cannot smuggle a second one to a downstream
 * server that reads bare LF as a line end (SMTP smuggling, CVE-2023-51766 family) when Motor
 * relays it.
 */
export function normalizeLineEndings(input: Buffer): Buffer {
  // Counted by jumping from line end to line end (Buffer.indexOf is native): a 20 KB message has a
  // few hundred of them, and most messages have no bare one, so they are returned as they are.
  let extra = 0;
  for (let i = input.indexOf(LF); i !== -1; i = input.indexOf(LF, i + 1)) if (i === 0 || input[i - 1] !== CR) extra++;
  for (let i = input.indexOf(CR); i !== -1; i = input.indexOf(CR, i + 1)) if (input[i + 1] !== LF) extra++;
  if (extra === 0) return input;
  const out = Buffer.allocUnsafe(input.length + extra);
  let j = 0;
  for (let i = 0; i < input.length; i++) {
    const b = input[i];
    if (b === LF && (i === 0 || input[i - 1] !== CR)) {
      out[j++] = CR;
      out[j++] = LF;
    } else if (b === CR && input[i + 1] !== LF) {
      out[j++] = CR;
      out[j++] = LF;
    } else {
      out[j++] = b;
    }
  }
  return out;
}

/** RFC 5322 section 2.1.1: a line MUST be at most 998 characters, CRLF excluded (counted in octets: RFC 6532 section 3.4). */
export const MAX_LINE_OCTETS = 998;

/**
 * Refuses a CRLF-normalized message with a line over MAX_LINE_OCTETS, in the header section or in
 * the body. Motor relays the message byte for byte under its DKIM signature, so it cannot fold or
 * wrap such a line itself, and the servers after it do not keep it either: Postfix's SMTP client
 * breaks it (smtp_line_length_limit, which breaks the signature), Exim refuses the message
 * (message_linelength_limit). The client, which can fold the field or encode the part
 * (quoted-printable, base64), learns it at submission instead of from a bounce.
 */
export function refuseLongLines(data: Buffer): void {
  let start = 0;
  let line = 1;
  for (;;) {
    const lf = data.indexOf(LF, start);
    // Normalized: every LF follows a CR, which is not part of the line.
    const length = (lf === -1 ? data.length : lf - 1) - start;
    if (length > MAX_LINE_OCTETS) {
      throw fail('invalid_message', 554, `Line ${line} of the message is longer than ${MAX_LINE_OCTETS} octets (RFC 5322 section 2.1.1): fold header fields, encode body parts as quoted-printable or base64`);
    }
    if (lf === -1) return;
    start = lf + 1;
    line++;
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The message as the string MessageAccepted.raw holds: 7-bit or UTF-8 (the delivery worker turns
 * it back into bytes as UTF-8). Other 8-bit content (a latin1 body sent as 8BITMIME) cannot
 * survive that round trip and is refused rather than corrupted; NUL is refused (RFC 5322 forbids
 * it, and PostgreSQL's jsonb cannot hold it).
 */
export function decodeMessage(raw: Buffer): string {
  if (raw.includes(0)) throw fail('invalid_message', 554, 'Message contains NUL bytes');
  try {
    return utf8.decode(raw);
  } catch {
    throw fail('invalid_message', 554, 'Message is neither 7-bit nor valid UTF-8: encode 8-bit parts as quoted-printable or base64');
  }
}

export interface HeaderField {
  /** Lower-cased field name. */
  name: string;
  /** The whole field as received, folded lines and the final CRLF included. */
  raw: string;
  /** The unfolded value (after the colon, trimmed). */
  value: string;
}

export interface SplitMessage {
  fields: HeaderField[];
  /** Everything after the header section, starting with the empty line (CRLF) that ends it. */
  body: string;
}

const FIELD_RE = /^([\x21-\x39\x3b-\x7e]+)[ \t]*:/;

/**
 * Limits of a submitted message's header section, checked before anything parses it (decoding a
 * megabyte-long From field blocks the event loop for seconds): its size (Postfix keeps 100 KB per
 * header field), the number of fields, and the size of the two fields Motor decodes.
 */
export const MAX_HEADER_SECTION_BYTES = 256 * 1024;
export const MAX_HEADER_FIELDS = 1000;
export const MAX_DECODED_FIELD_BYTES = 16 * 1024;

/**
 * Splits a CRLF-normalized message into header fields and body (RFC 5322 section 2.2); refuses a
 * header section past the limits above. Both are checked as each field is read, the last one
 * included: a section whose excess sits in its final field is refused like any other.
 */
export function splitMessage(raw: string): SplitMessage {
  const fields: HeaderField[] = [];
  let pos = 0;
  let bytes = 0;
  while (pos < raw.length) {
    if (raw.startsWith('\r\n', pos)) return { fields, body: raw.slice(pos) };
    const m = FIELD_RE.exec(raw.slice(pos, pos + 1000));
    // The first line that is not a header field starts the body (what Postfix's cleanup does).
    if (!m) return { fields, body: `\r\n${raw.slice(pos)}` };
    if (fields.length >= MAX_HEADER_FIELDS) throw fail('invalid_message', 554, `The message has more than ${MAX_HEADER_FIELDS} header fields`);
    let end = raw.indexOf('\r\n', pos);
    while (end !== -1 && (raw[end + 2] === ' ' || raw[end + 2] === '\t')) end = raw.indexOf('\r\n', end + 2);
    const stop = end === -1 ? raw.length : end + 2;
    const text = raw.slice(pos, stop);
    bytes += Buffer.byteLength(text);
    if (bytes > MAX_HEADER_SECTION_BYTES) throw fail('message_too_big', 552, `The message's header section exceeds ${MAX_HEADER_SECTION_BYTES} bytes`);
    fields.push({
      name: m[1].toLowerCase(),
      raw: end === -1 ? `${text}\r\n` : text,
      value: text.slice(m[0].length).replace(/\r\n(?=[ \t])/g, '').trim(),
    });
    pos = stop;
  }
  return { fields, body: '\r\n' };
}

/**
 * Header fields the service owns on a submitted message: removed whatever the client wrote.
 * Bcc must not travel (RFC 5321 section 7.2); Return-Path, Received, Delivered-To belong to the
 * servers on the way; DKIM-Signature, Authentication-Results and ARC-* would be forged or broken
 * claims; X-Service-* is Motor's namespace; Sender could name an address outside the block's
 * domain (the From header is what the domain rule checks).
 */
const OWNED_EXACT = new Set(['bcc', 'return-path', 'received', 'delivered-to', 'x-original-to', 'dkim-signature', 'authentication-results', 'sender']);
const OWNED_PREFIXES = ['arc-', 'x-service-'];
export const isServiceOwned = (name: string): boolean => OWNED_EXACT.has(name) || OWNED_PREFIXES.some((p) => name.startsWith(p));

/** RFC 5322 msg-id, pragmatically: `<left@right>`, printable, no whitespace or angle brackets inside. */
const MSG_ID_RE = /^<([\x21-\x3b\x3d\x3f-\x7e]{1,250}@[\x21-\x3b\x3d\x3f-\x7e]{1,250})>$/;

export interface PreparedMessage {
  raw: string;
  /** The Message-ID without angle brackets: the client's, or the one assigned. */
  messageId: string;
  messageIdAssigned: boolean;
  /** Names of the fields removed (service-owned), lower case. */
  removed: string[];
  /** The From field and the Subject field (if any) as received, for decoding (smtp/headerValues.ts). */
  fromField: string;
  subjectField: string | null;
}

/** RFC 5322 date-time in UTC. */
export const rfc5322Date = (d: Date): string => d.toUTCString().replace(/GMT$/, '+0000');

export function prepareMessage(raw: string, opts: { now: Date; newMessageId: () => string }): PreparedMessage {
  const { fields, body } = splitMessage(raw);
  const count = (n: string) => fields.filter((f) => f.name === n).length;
  if (count('from') !== 1) throw fail('invalid_message', 554, 'The message must have exactly one From header field');
  for (const f of fields) {
    if ((f.name === 'from' || f.name === 'subject') && f.raw.length > MAX_DECODED_FIELD_BYTES) {
      throw fail('invalid_message', 554, `The ${f.name === 'from' ? 'From' : 'Subject'} header field exceeds ${MAX_DECODED_FIELD_BYTES} bytes`);
    }
  }
  for (const single of ['subject', 'date', 'to', 'cc', 'message-id']) {
    if (count(single) > 1) throw fail('invalid_message', 554, `The message has more than one ${single} header field`);
  }

  const removed: string[] = [];
  const kept: HeaderField[] = [];
  for (const f of fields) {
    if (isServiceOwned(f.name)) removed.push(f.name);
    else kept.push(f);
  }

  const given = kept.find((f) => f.name === 'message-id');
  const valid = given ? MSG_ID_RE.exec(given.value) : null;
  let messageId: string;
  const added: string[] = [];
  if (valid) {
    messageId = valid[1];
  } else {
    if (given) {
      kept.splice(kept.indexOf(given), 1);
      removed.push('message-id');
    }
    messageId = opts.newMessageId();
    added.push(`Message-ID: <${messageId}>\r\n`);
  }
  if (!kept.some((f) => f.name === 'date')) added.push(`Date: ${rfc5322Date(opts.now)}\r\n`);

  return {
    raw: kept.map((f) => f.raw).join('') + added.join('') + body,
    messageId,
    messageIdAssigned: !valid,
    removed,
    fromField: fields.find((f) => f.name === 'from')!.raw,
    subjectField: fields.find((f) => f.name === 'subject')?.raw ?? null,
  };
}
