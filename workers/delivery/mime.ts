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
 */
export async function buildMime(input: MimeInput): Promise<Buffer> {
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
