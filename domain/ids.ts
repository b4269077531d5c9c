import { createHash, randomFillSync } from 'node:crypto';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const UUID_V4_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

export const isUuid = (s: unknown): s is string => typeof s === 'string' && UUID_RE.test(s);
export const isUuidV4 = (s: unknown): s is string => typeof s === 'string' && UUID_V4_RE.test(s);

/** Namespace of every name-based id Motor derives (RFC 9562 v5). */
export const MOTOR_NAMESPACE = '6f1c8a52-3b7e-4d0a-9a43-2f6e8b1c5d70';

/** The 16 bytes of a uuid (compact tokens carry ids this way). */
export const uuidBytes = (uuid: string): Buffer => Buffer.from(uuid.replace(/-/g, ''), 'hex');

/** The uuid spelling of 16 bytes (the first 16 of a longer buffer). */
export function uuidFromBytes(bytes: Buffer): string {
  const h = bytes.subarray(0, 16).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** RFC 9562 UUID version 5 (SHA-1, name based): the same name always gives the same id. */
export function uuidV5(name: string, namespace: string = MOTOR_NAMESPACE): string {
  const hash = createHash('sha1').update(uuidBytes(namespace)).update(name, 'utf8').digest();
  hash[6] = (hash[6] & 0x0f) | 0x50;
  hash[8] = (hash[8] & 0x3f) | 0x80;
  return uuidFromBytes(hash);
}

/** Ids and clock come into deciders as arguments; this is the production source of both. */
export interface Clock { now(): Date }
export const systemClock: Clock = { now: () => new Date() };
/**
 * New entity ids (messages, blocks, events, ...) are RFC 9562 version 7: 48 bits of Unix time in
 * milliseconds, then 74 random bits. Ids made later sort later, so every index keyed by an id
 * (the event store's event_id, the read models' message_id) grows at its right edge and the rows a
 * projector looks up for recent messages sit in recently used pages, where random v4 keys would
 * touch pages all over an index that no longer fits in memory. An id reveals when it was made,
 * which for these entities the API shows anyway; secrets and token ids never use it.
 */
export const newId = (): string => uuidV7();

const POOL_IDS = 256;
const pool = Buffer.alloc(16 * POOL_IDS);
let poolUsed = POOL_IDS;

/** RFC 9562 UUID version 7 for the time `ms` (default now). */
export function uuidV7(ms: number = Date.now()): string {
  if (poolUsed === POOL_IDS) {
    randomFillSync(pool);
    poolUsed = 0;
  }
  const b = pool.subarray(poolUsed * 16, ++poolUsed * 16);
  b.writeUIntBE(Math.max(0, Math.floor(ms)) % 2 ** 48, 0, 6);
  b[6] = (b[6] & 0x0f) | 0x70;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}
