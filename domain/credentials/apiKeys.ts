import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * API key format: `<kind>_live_<prefix>_<secret>`, kind `mk` (Motor Block key, for sending) or
 * `ak` (account key, for minting public bearer tokens). The prefix is the public lookup id; only a
 * SHA-256 of the secret is stored. Keys are 190+ bits of randomness, so a fast hash is the right
 * tool (a slow KDF protects low-entropy passwords, not random tokens).
 */

export type ApiKeyKind = 'block' | 'account';
const KIND_TAG: Record<ApiKeyKind, string> = { block: 'mk', account: 'ak' };
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const PREFIX_LEN = 12;
const SECRET_LEN = 40;

function base62(n: number): string {
  // Rejection sampling keeps every character uniform.
  let out = '';
  while (out.length < n) {
    for (const b of randomBytes(n * 2)) {
      if (b < 248 && out.length < n) out += BASE62[b % 62];
    }
  }
  return out;
}

export interface NewApiKey { key: string; prefix: string; secretHash: string }

export function generateApiKey(kind: ApiKeyKind): NewApiKey {
  const prefix = base62(PREFIX_LEN);
  const secret = base62(SECRET_LEN);
  return { key: `${KIND_TAG[kind]}_live_${prefix}_${secret}`, prefix, secretHash: hashSecret(secret) };
}

export const hashSecret = (secret: string): string => hash('sha256', secret, 'hex');

export interface ParsedApiKey { kind: ApiKeyKind; prefix: string; secret: string }

const KEY_RE = new RegExp(`^(mk|ak)_live_([0-9A-Za-z]{${PREFIX_LEN}})_([0-9A-Za-z]{${SECRET_LEN}})$`);

/** Null for anything that is not exactly a well-formed key (truncated, masked, wrong shape). */
export function parseApiKey(value: string): ParsedApiKey | null {
  const m = KEY_RE.exec(value);
  if (!m) return null;
  return { kind: m[1] === 'mk' ? 'block' : 'account', prefix: m[2], secret: m[3] };
}

/** Constant-time comparison of a presented secret with the stored hash. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const a = hash('sha256', secret, 'buffer');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** What list views show: never usable as a key (parseApiKey rejects it). */
/** The key's public part, `mk_live_<prefix>` / `ak_live_<prefix>`: what the operator's key revoke takes besides the whole key. */
export const publicKeyPart = (kind: ApiKeyKind, prefix: string): string => `${KIND_TAG[kind]}_live_${prefix}`;
export const maskApiKey = (kind: ApiKeyKind, prefix: string): string => `${publicKeyPart(kind, prefix)}_${'*'.repeat(8)}`;

/** A generated SMTP password: 32 base62 characters (190 bits), stored as hashSecret(password). */
export function generateSmtpPassword(): { password: string; passwordHash: string } {
  const password = base62(32);
  return { password, passwordHash: hashSecret(password) };
}
