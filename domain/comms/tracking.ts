import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import { QuoteType, Tokenizer } from 'htmlparser2';
import { isUuid, uuidBytes, uuidFromBytes } from '../ids';

/**
 * Open and click tracking of campaign mail (docs/COMMUNICATIONS.md "Tracking"). Pure: the secret,
 * the public base URL and the clock come in as arguments.
 *
 * Only campaign mail is instrumented: transactional mail (/v1/send, SMTP) is never rewritten.
 *
 * A token is ONE base64url string (no `.`, so `<token>.gif` splits unambiguously) of
 * `payload ‖ HMAC-SHA256(secret, payload)` (the whole 32-byte MAC, compared in constant time).
 * Payload v1: version (1 byte), kind (`o` open, `c` click), the tenant, block, campaign and message
 * ids as 4 × 16 raw bytes, then for a click the destination URL (ASCII, the rest). The recipient is
 * NOT in it: tracking URLs end up in proxy logs, link scanners and browser history, so they carry
 * opaque ids only, and the recipient of a hit is read from the message's `MessageAccepted` when it
 * is recorded (commands/comms/tracking.ts). The MAC makes a token unforgeable, so the click redirect
 * only ever goes to a URL Motor signed.
 * No expiry: a link in an old mail must keep working; rotating TOKEN_SECRET revokes every link.
 */

/** What a token names: opaque ids only (never the recipient's address). */
export interface TrackingContext { tenantId: string; motorBlockId: string; campaignId: string; messageId: string }

export type TrackingKind = 'open' | 'click';
export type TrackingTarget = { kind: 'open'; ctx: TrackingContext } | { kind: 'click'; ctx: TrackingContext; url: string };

/** The open pixel: a 1×1 transparent GIF (43 bytes). */
export const TRANSPARENT_GIF = Buffer.from('R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==', 'base64');

/** Destinations longer than this are left untracked (the token would make the link unwieldy). */
export const MAX_TRACKED_URL = 2048;
/** Longest token accepted for verification: a click token of the longest tracked URL (2,862 characters). */
export const MAX_TOKEN_CHARS = Math.ceil(((2 + 64 + MAX_TRACKED_URL + 32) * 4) / 3);
/** User agents are stored truncated to this many characters. */
export const USER_AGENT_MAX = 512;

const VERSION = 1;
const KIND_BYTE: Record<TrackingKind, number> = { open: 0x6f, click: 0x63 };
const MAC_BYTES = 32;
const IDS_BYTES = 64;

/** The key tracking tokens are signed with: HKDF-SHA256 of the token secret with its own label (not the JWT or unsubscribe key). */
export function trackingSecret(tokenSecret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', tokenSecret, Buffer.alloc(0), 'motor/comm-tracking/v1', 32));
}

const mac = (secret: string | Buffer, payload: Buffer): Buffer => createHmac('sha256', secret).update(payload).digest();

/** A signed token for an open (`url` omitted) or a click on `url` (already normalised by `trackableUrl`). */
export function trackingToken(secret: string | Buffer, ctx: TrackingContext, url?: string): string {
  for (const k of ['tenantId', 'motorBlockId', 'campaignId', 'messageId'] as const) {
    if (!isUuid(ctx[k])) throw new Error(`trackingToken: ${k} must be a uuid`);
  }
  const payload = Buffer.concat([
    Buffer.from([VERSION, KIND_BYTE[url === undefined ? 'open' : 'click']]),
    uuidBytes(ctx.tenantId), uuidBytes(ctx.motorBlockId), uuidBytes(ctx.campaignId), uuidBytes(ctx.messageId),
    Buffer.from(url ?? '', 'utf8'),
  ]);
  return Buffer.concat([payload, mac(secret, payload)]).toString('base64url');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** What a token names, or null when it is malformed, of another kind, or its MAC does not verify. */
export function verifyTrackingToken(secret: string | Buffer, token: unknown, kind: TrackingKind): TrackingTarget | null {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_CHARS || !/^[A-Za-z0-9_-]+$/.test(token)) return null;
  const raw = Buffer.from(token, 'base64url');
  // Canonical encoding only: one spelling per token.
  if (raw.length < 2 + IDS_BYTES + MAC_BYTES || raw.toString('base64url') !== token) return null;
  const payload = raw.subarray(0, raw.length - MAC_BYTES);
  const given = raw.subarray(raw.length - MAC_BYTES);
  if (!timingSafeEqual(given, mac(secret, payload))) return null;
  if (payload[0] !== VERSION || payload[1] !== KIND_BYTE[kind]) return null;
  const ids = payload.subarray(2, 2 + IDS_BYTES);
  let rest: string;
  try {
    rest = utf8.decode(payload.subarray(2 + IDS_BYTES));
  } catch {
    return null;
  }
  const ctx: TrackingContext = {
    tenantId: uuidFromBytes(ids.subarray(0, 16)), motorBlockId: uuidFromBytes(ids.subarray(16, 32)),
    campaignId: uuidFromBytes(ids.subarray(32, 48)), messageId: uuidFromBytes(ids.subarray(48, 64)),
  };
  if (kind === 'open') return rest === '' ? { kind, ctx } : null;
  // Signed by us, so already normalised; checked again so a Location header can never carry anything else.
  return trackableUrl(rest) === rest ? { kind, ctx, url: rest } : null;
}

/**
 * The URL a link points to when it is one to track: an absolute http(s) URL, WHATWG-serialised
 * (ASCII only, no whitespace: safe as a Location header), at most MAX_TRACKED_URL characters.
 * Null for anything else (mailto:, tel:, fragments, relative links, javascript:, merge
 * placeholders such as `{{unsubscribe_url}}`).
 */
export function trackableUrl(href: string): string | null {
  // HTML strips leading and trailing ASCII whitespace from URL attributes.
  const s = href.replace(/^[\t\n\f\r ]+|[\t\n\f\r ]+$/g, '');
  if (!/^https?:/i.test(s)) return null;
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return null;
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.host === '') return null;
  return u.href.length <= MAX_TRACKED_URL ? u.href : null;
}

export const openPixelUrl = (baseUrl: string, token: string): string => `${trimBase(baseUrl)}/comm-api/t/o/${token}.gif`;
export const clickUrl = (baseUrl: string, token: string): string => `${trimBase(baseUrl)}/comm-api/t/c/${token}`;
const trimBase = (b: string): string => b.replace(/\/+$/, '');

const escAttr = (s: string, quote: '"' | "'"): string => s.replace(quote === '"' ? /[&"]/g : /[&']/g, (c) => ({ '&': '&amp;', '"': '&quot;', "'": '&#39;' })[c]!);
const isSpace = (c: string | undefined): boolean => c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f';

/** Prefixes whose links are left alone: the unsubscribe link and links already tracked. */
function untouchedPrefixes(baseUrl: string): string[] {
  const b = trimBase(baseUrl);
  const out = [`${b}/comm-api/u/`, `${b}/comm-api/t/`];
  const n = trackableUrl(b);
  if (n !== null) out.push(`${n.replace(/\/+$/, '')}/comm-api/u/`, `${n.replace(/\/+$/, '')}/comm-api/t/`);
  return out;
}

/**
 * The campaign HTML with links rewritten to the click redirect and an open pixel added. Links to
 * `${baseUrl}/comm-api/u/` (unsubscribe), mailto:, tel:, fragment-only and non-http(s) links are
 * left alone.
 *
 * Call it on the HTML of ONE message (one recipient), merge fields already filled in: the tokens
 * name the message, never the address (the recipient is read from the message when a hit is
 * recorded). The HTML is read with htmlparser2's tokenizer (the parser the template checks use),
 * and only the `href` values of `<a>` and `<area>` are replaced, in place: every other byte is kept. A value's entities are decoded before it is judged (`&amp;` in a
 * query string is `&`). Already-tracked links and an existing pixel of this base URL are kept,
 * so instrumenting twice changes nothing. The pixel goes right before the last `</body>`, or at
 * the end when there is none. Deterministic: the same input gives the same output.
 */
export function instrumentHtml(html: string, baseUrl: string, secret: string | Buffer, ctx: TrackingContext, opts?: { opens?: boolean; clicks?: boolean }): string {
  const opens = opts?.opens ?? true;
  const clicks = opts?.clicks ?? true;
  if (!opens && !clicks) return html;
  const skip = untouchedPrefixes(baseUrl);
  const pixelPrefixes = skip.filter((p) => p.endsWith('/comm-api/t/')).map((p) => `${p}o/`);
  const edits: Array<{ start: number; end: number; text: string }> = [];
  let tag = '';
  let attr = '';
  let attrNameEnd = 0;
  let value = '';
  let hrefSeen = false;
  let srcSeen = false;
  let bodyClose = -1;
  let hasPixel = false;

  const valueStart = (): number => {
    let i = attrNameEnd;
    while (isSpace(html[i])) i++;
    i++; // '='
    while (isSpace(html[i])) i++;
    return i;
  };

  const tokenizer = new Tokenizer({ xmlMode: false, decodeEntities: true }, {
    onopentagname(start, end) { tag = html.slice(start, end).toLowerCase(); hrefSeen = false; srcSeen = false; },
    onattribname(start, end) { attr = html.slice(start, end).toLowerCase(); attrNameEnd = end; value = ''; },
    onattribdata(start, end) { value += html.slice(start, end); },
    onattribentity(cp) { value += String.fromCodePoint(cp); },
    onattribend(quote, end) {
      if (quote === QuoteType.NoValue) return;
      if (tag === 'img' && attr === 'src' && !srcSeen) {
        srcSeen = true;
        const v = value.trim();
        if (pixelPrefixes.some((p) => v.startsWith(p))) hasPixel = true;
        return;
      }
      // The first href of a tag is the one a client follows.
      if (!clicks || attr !== 'href' || (tag !== 'a' && tag !== 'area') || hrefSeen) return;
      hrefSeen = true;
      const url = trackableUrl(value);
      if (url === null || skip.some((p) => url.startsWith(p) || value.trim().startsWith(p))) return;
      const target = clickUrl(baseUrl, trackingToken(secret, ctx, url));
      const start = valueStart();
      if (quote === QuoteType.Unquoted) edits.push({ start, end, text: `"${escAttr(target, '"')}"` });
      else {
        const q = quote === QuoteType.Single ? "'" : '"';
        edits.push({ start: start + 1, end: end - 1, text: escAttr(target, q) });
      }
    },
    onclosetag(start, end) {
      if (html.slice(start, end).toLowerCase() === 'body') bodyClose = html.lastIndexOf('<', start);
    },
    oncdata() {}, oncomment() {}, ondeclaration() {}, onend() {}, onopentagend() {}, onprocessinginstruction() {},
    onselfclosingtag() {}, ontext() {}, ontextentity() {},
  });
  tokenizer.write(html);
  tokenizer.end();

  if (opens && !hasPixel) {
    const src = escAttr(openPixelUrl(baseUrl, trackingToken(secret, ctx)), '"');
    const pixel = `<img src="${src}" width="1" height="1" alt="" border="0" style="display:block;width:1px;height:1px;border:0;margin:0;padding:0">`;
    const at = bodyClose >= 0 ? bodyClose : html.length;
    edits.push({ start: at, end: at, text: pixel });
  }
  edits.sort((a, b) => a.start - b.start);
  let out = '';
  let pos = 0;
  for (const e of edits) {
    out += html.slice(pos, e.start) + e.text;
    pos = e.end;
  }
  return out + html.slice(pos);
}

/** The IP address stored with a hit: IPv4 truncated to its /24, IPv6 to its /48 (IPv4-mapped IPv6 as IPv4); null if not an address. */
export function truncateIp(ip: string | undefined | null): string | null {
  if (typeof ip !== 'string') return null;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  const v4 = mapped ? mapped[1] : ip;
  if (isIPv4(v4)) return `${v4.split('.').slice(0, 3).join('.')}.0`;
  if (!isIPv6(ip)) return null;
  const groups = expandIPv6(ip.replace(/%.*$/, ''));
  if (groups === null) return null;
  const kept = groups.slice(0, 3).map((g) => g.replace(/^0+(?=.)/, ''));
  while (kept.length > 0 && kept[kept.length - 1] === '0') kept.pop();
  return `${kept.join(':')}::`;
}

function expandIPv6(ip: string): string[] | null {
  let s = ip.toLowerCase();
  // An embedded IPv4 tail (::1.2.3.4) as two groups.
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (tail) {
    const b = tail[1].split('.').map(Number);
    s = s.slice(0, -tail[1].length) + `${((b[0] << 8) | b[1]).toString(16)}:${((b[2] << 8) | b[3]).toString(16)}`;
  }
  const [head, rest] = s.split('::');
  const h = head === '' ? [] : head.split(':');
  const r = rest === undefined ? [] : rest === '' ? [] : rest.split(':');
  const fill = rest === undefined ? 0 : 8 - h.length - r.length;
  const groups = [...h, ...Array(Math.max(fill, 0)).fill('0'), ...r];
  return groups.length === 8 ? groups : null;
}

/** A user agent as stored: control characters dropped, at most USER_AGENT_MAX characters (code points); null when absent or empty. */
export function storedUserAgent(ua: string | undefined): string | null {
  if (typeof ua !== 'string') return null;
  // eslint-disable-next-line no-control-regex
  const clean = ua.replace(/[\u0000-\u001f\u007f]/g, '').trim();
  if (clean === '') return null;
  return [...clean].slice(0, USER_AGENT_MAX).join('');
}

/**
 * Requests that are not a person reading: a browser's speculative prefetch (`Purpose` /
 * `Sec-Purpose: prefetch`, `X-Moz: prefetch`, `X-Purpose: preview`). They get the same answer but
 * record nothing. HEAD requests never record either (link checkers use them).
 */
export function isPrefetch(headers: Record<string, string | string[] | undefined>): boolean {
  const h = (n: string): string => {
    const v = headers[n];
    return (Array.isArray(v) ? v.join(',') : v ?? '').toLowerCase();
  };
  return /prefetch|preview/.test(`${h('purpose')} ${h('sec-purpose')} ${h('x-purpose')} ${h('x-moz')}`);
}
