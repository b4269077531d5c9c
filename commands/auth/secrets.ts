import { createHash, createHmac, randomBytes, randomInt } from 'node:crypto';

/**
 * Secrets of the onboarding flow. Codes are 6 digits (20 bits): they are stored as an HMAC keyed
 * by a server secret, so the log alone does not let anyone brute-force them offline. Opaque
 * tokens (setup token, refresh token, handoff code) are 256-bit random: a SHA-256 is enough.
 */

export const generateCode = (): string => String(randomInt(0, 1_000_000)).padStart(6, '0');

export const codeHash = (pepper: string, userId: string, code: string): string =>
  createHmac('sha256', pepper).update(`${userId}:${code}`, 'utf8').digest('hex');

export const sha256Hex = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');

export const randomSecret = (): string => randomBytes(32).toString('base64url');

/** Opaque tokens that name their stream: `<tag>_<uuid without dashes>_<43 base64url chars>`. */
export type OpaqueTag = 'rt' | 'wh';
export const opaqueToken = (tag: OpaqueTag, id: string, secret: string): string => `${tag}_${id.replace(/-/g, '')}_${secret}`;

export function parseOpaqueToken(tag: OpaqueTag, value: unknown): { id: string; secret: string } | null {
  if (typeof value !== 'string') return null;
  const m = new RegExp(`^${tag}_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$`).exec(value);
  if (!m) return null;
  const h = m[1];
  return { id: `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`, secret: m[2] };
}

/** Setup tokens are bound to the address by the user stream; `st_` + 43 chars. */
export const setupToken = (): string => `st_${randomSecret()}`;
export const isSetupTokenShape = (v: unknown): v is string => typeof v === 'string' && /^st_[A-Za-z0-9_-]{43}$/.test(v);
