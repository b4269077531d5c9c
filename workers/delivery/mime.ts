import { randomBytes } from 'node:crypto';
import MailComposer from 'nodemailer/lib/mail-composer';

export interface MimeInput {
  from: string;
  fromName: string | null;
  to: string[];
  subject: string;
  text: string | null;
  html: string | null;
  /** Custom headers, already validated upstream (never a reserved name). */
  headers: Record<string, string>;
  /** RFC 5322 Message-ID without angle brackets. */
  messageId: string;
  date: Date;
  /** Host name for generated ids; only used if nodemailer has to make one up. */
  hostname?: string;
}

/** Header fields the composer owns: a custom header must not replace or duplicate them. */
const OWNED_HEADERS = new Set([
  'from', 'to', 'cc', 'bcc', 'sender', 'subject', 'date', 'message-id', 'mime-version',
  'content-type', 'content-transfer-encoding', 'return-path', 'received', 'dkim-signature',
]);

const MAX_LINE = 998; // RFC 5322 §2.1.1

/**
 * The RFC 5322 message for one submission: From with its display name (quoted or RFC 2047
 * encoded as needed), multipart/alternative when both text and html are given, CRLF line ends.
 * ASCII custom headers go out exactly as given; non-ASCII ones are RFC 2047 encoded.
 *
 * Built directly as a string (`buildMimeLean`, ~20× cheaper than nodemailer's stream-based
 * MailComposer) unless an address is not ASCII (SMTPUTF8), which MailComposer handles.
 */
export async function buildMime(input: MimeInput): Promise<Buffer> {
  const lean = buildMimeLean(input);
  return lean ?? buildMimeComposer(input);
}

/** The same message through nodemailer's MailComposer (the general path). */
export async function buildMimeComposer(input: MimeInput): Promise<Buffer> {
  const headers: Array<{ key: string; value: string | { prepared: true; value: string } }> = [];
  const customNames = new Map<string, string>();
  for (const [key, value] of Object.entries(input.headers)) {
    if (!/^[!-9;-~]+$/.test(key)) throw new TypeError(`Invalid header name ${JSON.stringify(key)}`);
    if (/[\r\n]/.test(value)) throw new TypeError(`Header ${key} contains a line break`);
    if (OWNED_HEADERS.has(key.toLowerCase())) throw new TypeError(`Header ${key} is set by the composer`);
    const asciiFits = /^[\x20-\x7e\t]*$/.test(value) && key.length + 2 + value.length <= MAX_LINE;
    customNames.set(key.toLowerCase(), key);
    headers.push({ key, value: asciiFits ? { prepared: true, value } : value });
  }

  const composer = new MailComposer({
    from: input.fromName ? { name: input.fromName, address: input.from } : input.from,
    to: input.to,
    subject: input.subject,
    messageId: `<${input.messageId}>`,
    date: input.date,
    ...(input.text !== null ? { text: input.text } : {}),
    ...(input.html !== null ? { html: input.html } : {}),
    headers: headers as never,
    newline: 'win',
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  const root = composer.compile();
  if (input.hostname) root.hostname = input.hostname;
  return restoreHeaderNames(await root.build(), customNames);
}

/**
 * nodemailer Camel-Cases every field name ("x-campaign-ID" becomes "X-Campaign-ID"), and its
 * normalizeHeaderKey hook is skipped for prepared values: give the custom fields of the top-level
 * header block their original spelling back.
 */
function restoreHeaderNames(raw: Buffer, names: Map<string, string>): Buffer {
  if (names.size === 0) return raw;
  const end = raw.indexOf('\r\n\r\n');
  if (end === -1) return raw;
  const block = raw
    .subarray(0, end)
    .toString('latin1')
    .replace(/^([!-9;-~]+):/gm, (whole, name: string) => {
      const original = names.get(name.toLowerCase());
      return original ? `${original}:` : whole;
    });
  return Buffer.concat([Buffer.from(block, 'latin1'), raw.subarray(end)]);
}

// ---------------------------------------------------------------------------------------------
// Lean builder

const HEX = Array.from({ length: 256 }, (_, i) => `=${i.toString(16).toUpperCase().padStart(2, '0')}`);
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;
/** RFC 5322 specials (and the quote itself): a display name with one of them is quoted. */
const SPECIALS = /[()<>[\]:;@\\,."]/;

function validateHeaders(headers: Record<string, string>): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const [key, value] of Object.entries(headers)) {
    if (!/^[!-9;-~]+$/.test(key)) throw new TypeError(`Invalid header name ${JSON.stringify(key)}`);
    if (/[\r\n]/.test(value)) throw new TypeError(`Header ${key} contains a line break`);
    if (OWNED_HEADERS.has(key.toLowerCase())) throw new TypeError(`Header ${key} is set by the composer`);
    out.push([key, value]);
  }
  return out;
}

/** null when the message needs MailComposer (a non-ASCII address). */
export function buildMimeLean(input: MimeInput): Buffer | null {
  const custom = validateHeaders(input.headers);
  if (!PRINTABLE_ASCII.test(input.from) || input.to.some((a) => !PRINTABLE_ASCII.test(a))) return null;

  const lines: string[] = [];
  for (const [key, value] of custom) {
    const asciiFits = /^[\x20-\x7e\t]*$/.test(value) && key.length + 2 + value.length <= MAX_LINE;
    lines.push(asciiFits ? `${key}: ${value}` : `${key}: ${encodedWords(value, key.length + 2)}`);
  }
  lines.push(`From: ${input.fromName ? `${displayName(input.fromName)} <${input.from}>` : input.from}`);
  lines.push(foldList('To: ', input.to));
  lines.push(`Subject: ${unstructured(input.subject, 9)}`);
  lines.push(`Message-ID: <${input.messageId}>`);
  lines.push(`Date: ${input.date.toUTCString().replace(/GMT$/, '+0000')}`);
  lines.push('MIME-Version: 1.0');

  const parts: Array<{ type: string; body: string }> = [];
  if (input.text !== null) parts.push({ type: 'text/plain', body: input.text });
  if (input.html !== null) parts.push({ type: 'text/html', body: input.html });
  if (parts.length === 0) parts.push({ type: 'text/plain', body: '' });

  if (parts.length === 1) {
    const { cte, encoded } = encodeBody(parts[0].body);
    lines.push(`Content-Type: ${parts[0].type}; charset=utf-8`, `Content-Transfer-Encoding: ${cte}`);
    return Buffer.from(`${lines.join('\r\n')}\r\n\r\n${encoded}`, 'utf8');
  }
  const encodedParts = parts.map((p) => ({ type: p.type, ...encodeBody(p.body) }));
  let boundary: string;
  do boundary = `--_Motor-${randomBytes(8).toString('hex')}-Part_1`;
  while (encodedParts.some((p) => p.encoded.includes(boundary)));
  lines.push('Content-Type: multipart/alternative;', ` boundary="${boundary}"`);
  let out = `${lines.join('\r\n')}\r\n\r\n`;
  for (const p of encodedParts) {
    out += `--${boundary}\r\nContent-Type: ${p.type}; charset=utf-8\r\nContent-Transfer-Encoding: ${p.cte}\r\n\r\n${p.encoded}\r\n`;
  }
  out += `--${boundary}--\r\n`;
  return Buffer.from(out, 'utf8');
}

function displayName(name: string): string {
  if (!PRINTABLE_ASCII.test(name) || name.includes('=?')) return encodedWords(name, 6);
  return SPECIALS.test(name) ? `"${name.replace(/(["\\])/g, '\\$1')}"` : name;
}

/** An unstructured value (Subject): ASCII folded at spaces, anything else as encoded words. */
function unstructured(value: string, used: number): string {
  if (!PRINTABLE_ASCII.test(value) || value.includes('=?')) return encodedWords(value, used);
  if (used + value.length <= 78) return value;
  // Fold before a space (unfolding restores the value exactly); a run without spaces stays whole.
  // Before the last space of a run: "a  b" folds as "a \r\n b", which unfolds to the same value
  // whether a reader removes only the CRLF (RFC 5322) or also collapses the white space after it.
  const words = value.split(/(?= (?! ))/);
  let out = '';
  let line = used;
  // Never fold a line that holds only white space (a run of spaces before a long word): RFC 5322
  // §3.2.2 forbids a header line made of white space alone.
  let blank = true;
  for (const w of words) {
    if (out && line + w.length > 78 && !blank) {
      out += '\r\n';
      line = 0;
      blank = true;
    }
    out += w;
    line += w.length;
    blank &&= w.trim() === '';
  }
  if (out.split('\r\n').some((l) => l.length > MAX_LINE - used)) return encodedWords(value, used);
  return out;
}

function foldList(prefix: string, items: string[]): string {
  let out = prefix;
  let line = prefix.length;
  items.forEach((item, i) => {
    if (i > 0) {
      if (line + 2 + item.length > 78) {
        out += ',\r\n ';
        line = 1;
      } else {
        out += ', ';
        line += 2;
      }
    }
    out += item;
    line += item.length;
  });
  return out;
}

/** RFC 2047 Q encoded-words in UTF-8, each at most 75 characters, never splitting a character. */
function encodedWords(value: string, used: number): string {
  const words: string[] = [];
  let cur = '';
  const max = 75 - 12; // "=?UTF-8?Q?" + "?="
  for (const ch of value) {
    let enc: string;
    if (/[A-Za-z0-9!*+\-/]/.test(ch)) enc = ch;
    else if (ch === ' ') enc = '_';
    else enc = [...Buffer.from(ch, 'utf8')].map((b) => HEX[b]).join('');
    if (cur.length + enc.length > max) {
      words.push(cur);
      cur = '';
    }
    cur += enc;
  }
  words.push(cur);
  void used;
  return words.map((w) => `=?UTF-8?Q?${w}?=`).join('\r\n ');
}

/** 7bit when ASCII with short lines; else quoted-printable, or base64 when mostly non-ASCII. */
function encodeBody(body: string): { cte: string; encoded: string } {
  const text = body.replace(/\r\n|\r|\n/g, '\r\n');
  if (/^[\x00-\x7f]*$/.test(text) && !/[\x00\x7f]/.test(text) && longestLine(text) <= 76) return { cte: '7bit', encoded: text };
  const bytes = Buffer.from(text, 'utf8');
  let high = 0;
  for (let i = 0; i < bytes.length; i++) if (bytes[i] > 0x7e) high++;
  if (high > bytes.length / 3) {
    return { cte: 'base64', encoded: bytes.toString('base64').replace(/.{76}(?=.)/g, '$&\r\n') };
  }
  return { cte: 'quoted-printable', encoded: quotedPrintable(bytes) };
}

/** Characters in the longest CRLF-separated line. */
function longestLine(text: string): number {
  let longest = 0;
  let start = 0;
  for (let end = text.indexOf('\r\n'); end !== -1; end = text.indexOf('\r\n', start)) {
    longest = Math.max(longest, end - start);
    start = end + 2;
  }
  return Math.max(longest, text.length - start);
}

const EQ = 0x3d;
const CR = 0x0d;
const LF = 0x0a;
const HEX_DIGITS = Buffer.from('0123456789ABCDEF', 'latin1');

/**
 * Quoted-printable (RFC 2045 §6.7) of UTF-8 text whose line breaks are all CRLF: each line's
 * bytes, "=XX" for the non-printable ones, "=" itself, and a space or tab that ends a line; soft
 * breaks ("=" CRLF) keep every line at most 76 characters. One pass into one buffer: built a
 * character at a time as a string, this was most of what a delivery worker allocated.
 */
export function quotedPrintable(bytes: Buffer): string {
  // Worst case: every byte as "=XX", and a soft break every 25 of them.
  const out = Buffer.allocUnsafe(bytes.length * 3 + Math.ceil(bytes.length / 25) * 3 + 3);
  let o = 0;
  let col = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (b === CR && bytes[i + 1] === LF) {
      out[o++] = CR;
      out[o++] = LF;
      i++;
      col = 0;
      continue;
    }
    const endsLine = i + 1 === bytes.length || (bytes[i + 1] === CR && bytes[i + 2] === LF);
    const literal = (b >= 33 && b <= 126 && b !== EQ) || ((b === 32 || b === 9) && !endsLine);
    const width = literal ? 1 : 3;
    // A line is at most 76 characters including the soft break's "=".
    if (col + width > (endsLine ? 76 : 75)) {
      out[o++] = EQ;
      out[o++] = CR;
      out[o++] = LF;
      col = 0;
    }
    if (literal) {
      out[o++] = b;
    } else {
      out[o++] = EQ;
      out[o++] = HEX_DIGITS[b >> 4];
      out[o++] = HEX_DIGITS[b & 15];
    }
    col += width;
  }
  return out.toString('latin1', 0, o);
}
