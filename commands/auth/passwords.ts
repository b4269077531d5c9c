import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Passwords: scrypt (memory-hard) with N=2^15, r=8, p=3 (32 MiB per hash, one of OWASP's
 * recommended settings). The parameters are stored with the hash so they can be raised later;
 * format `scrypt$<N>$<r>$<p>$<salt b64>$<hash b64>`. Hashing runs on libuv's thread pool, which
 * also bounds how many run at once (and so the memory).
 */

const PARAMS = { N: 2 ** 15, r: 8, p: 3 } as const;
const KEYLEN = 32;

function derive(password: string, salt: Buffer, o: { N: number; r: number; p: number }): Promise<Buffer> {
  const opts: ScryptOptions = { N: o.N, r: o.r, p: o.p, maxmem: 256 * o.N * o.r + 1024 * 1024 };
  return new Promise((resolve, reject) => scrypt(password.normalize('NFKC'), salt, KEYLEN, opts, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMS);
  return `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = parts.slice(1, 4).map(Number);
  if (![N, r, p].every((n) => Number.isInteger(n) && n > 0) || N > 2 ** 20) return false;
  const expected = Buffer.from(parts[5], 'base64');
  const key = await derive(password, Buffer.from(parts[4], 'base64'), { N, r, p });
  return key.length === expected.length && timingSafeEqual(key, expected);
}

let dummy: Promise<string> | null = null;
/** Same work as a real check, for unknown addresses (login time does not tell who exists). */
export async function burnPasswordCheck(password: string): Promise<false> {
  dummy ??= hashPassword('motor-dummy-password-for-timing');
  await verifyPassword(password, await dummy);
  return false;
}

/** 400 weak_password below this; a passphrase is welcome, so the ceiling is generous. */
export const PASSWORD_MIN = 10;
export const PASSWORD_MAX = 256;
