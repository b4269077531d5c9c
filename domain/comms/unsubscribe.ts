import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { isUuid, uuidBytes, uuidFromBytes } from '../ids';

/**
 * One-click unsubscribe links of campaign mail (docs/COMMUNICATIONS.md "Unsubscribe"). Pure: the
 * secret and the public base URL come in as arguments.
 *
 * A token is `<payload>.<mac>` (108 characters): payload = base64url of the tenant, list and contact
 * ids as 48 raw bytes, mac = base64url of the whole HMAC-SHA256(secret, payload). The ids are not
 * secret (the contact reads them in their own mail); the MAC is what makes a link unforgeable.
 * No expiry: a link in an old mail must keep working whenever the mail is read (a contact's wish
 * to leave does not expire), so revoking links means rotating TOKEN_SECRET.
 */

export interface UnsubscribeTarget { tenantId: string; listId: string; contactId: string }

/** The key unsubscribe tokens are signed with: HKDF-SHA256 of the token secret with its own label, so it is not the JWT key. */
export function unsubscribeSecret(tokenSecret: string | Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', tokenSecret, Buffer.alloc(0), 'motor/comm-unsubscribe/v1', 32));
}

const mac = (secret: string | Buffer, payload: string): Buffer => createHmac('sha256', secret).update(payload).digest();

export function unsubscribeToken(secret: string | Buffer, t: UnsubscribeTarget): string {
  if (!isUuid(t.tenantId) || !isUuid(t.listId) || !isUuid(t.contactId)) throw new Error('unsubscribeToken: tenantId, listId and contactId must be uuids');
  const payload = Buffer.concat([uuidBytes(t.tenantId), uuidBytes(t.listId), uuidBytes(t.contactId)]).toString('base64url');
  return `${payload}.${mac(secret, payload).toString('base64url')}`;
}

/** The signed one-click unsubscribe URL of a contact: `${baseUrl}/comm-api/u/${token}`. */
export function unsubscribeUrl(baseUrl: string, secret: string | Buffer, t: UnsubscribeTarget): string {
  return `${baseUrl.replace(/\/+$/, '')}/comm-api/u/${unsubscribeToken(secret, t)}`;
}

/** The RFC 2369 / RFC 8058 headers for a one-click unsubscribe URL. */
export function listUnsubscribeHeaders(url: string): { 'List-Unsubscribe': string; 'List-Unsubscribe-Post': string } {
  return { 'List-Unsubscribe': `<${url}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' };
}

const TOKEN_RE = /^([A-Za-z0-9_-]{64})\.([A-Za-z0-9_-]{43})$/;

/** The contact a token names, or null when it is malformed or its MAC does not verify (compared in constant time). */
export function verifyUnsubscribeToken(secret: string | Buffer, token: string): UnsubscribeTarget | null {
  if (typeof token !== 'string') return null;
  const m = TOKEN_RE.exec(token);
  if (!m) return null;
  const given = Buffer.from(m[2], 'base64url');
  const expected = mac(secret, m[1]);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  // Canonical encoding only: base64url has one spelling of 48 bytes (64 chars, no padding bits).
  const raw = Buffer.from(m[1], 'base64url');
  if (raw.length !== 48 || raw.toString('base64url') !== m[1]) return null;
  const t = { tenantId: uuidFromBytes(raw.subarray(0, 16)), listId: uuidFromBytes(raw.subarray(16, 32)), contactId: uuidFromBytes(raw.subarray(32, 48)) };
  return isUuid(t.tenantId) && isUuid(t.listId) && isUuid(t.contactId) ? t : null;
}
