import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The envelope sender (Return-Path) of delivered messages when BOUNCE_DOMAIN is set:
 * `bounces+<token>@<BOUNCE_DOMAIN>`, one token per message. The token is the message uuid in hex
 * (32 characters) and the first 16 hex characters of HMAC-SHA256(key, that hex): 56 characters of
 * local part (RFC 5321 allows 64), lower case only, since some MTAs fold the case of the address
 * they report to. The key is derived from TOKEN_SECRET with a label of its own, so a bounce token
 * is never a valid signature of anything else the secret signs.
 */

const PREFIX = 'bounces+';
const TAG_HEX = 16;
const TOKEN_RE = /^bounces\+([0-9a-f]{32})([0-9a-f]{16})$/;

export interface ReturnPathSettings {
  /** BOUNCE_DOMAIN, lower case. */
  domain: string;
  /** The HMAC key (returnPathKey()), not TOKEN_SECRET itself. */
  key: Buffer;
}

/** The bounce-address key: HMAC-SHA256(TOKEN_SECRET, label). */
export const returnPathKey = (tokenSecret: string): Buffer => createHmac('sha256', tokenSecret).update('motor bounce address v1').digest();

export const returnPathSettings = (domain: string, tokenSecret: string): ReturnPathSettings => ({ domain: domain.toLowerCase(), key: returnPathKey(tokenSecret) });

const tag = (key: Buffer, hex: string): string => createHmac('sha256', key).update(hex).digest('hex').slice(0, TAG_HEX);

/** The envelope sender for a message. */
export function bounceAddress(messageId: string, s: ReturnPathSettings): string {
  const hex = messageId.replace(/-/g, '').toLowerCase();
  return `${PREFIX}${hex}${tag(s.key, hex)}@${s.domain}`;
}

/**
 * The message id a bounce address names, or null when the address is not one Motor made (other
 * domain, other local part, a tag that does not verify). Case-insensitive; the tag is compared in
 * constant time.
 */
export function messageIdOfBounceAddress(address: string, s: ReturnPathSettings): string | null {
  const at = address.lastIndexOf('@');
  if (at < 0) return null;
  const domain = address.slice(at + 1).toLowerCase().replace(/\.$/, '');
  if (domain !== s.domain) return null;
  const m = TOKEN_RE.exec(address.slice(0, at).toLowerCase());
  if (!m) return null;
  const [, hex, given] = m;
  if (!timingSafeEqual(Buffer.from(tag(s.key, hex), 'latin1'), Buffer.from(given, 'latin1'))) return null;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
