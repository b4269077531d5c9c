import { createHash, randomUUID } from 'node:crypto';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const UUID_V4_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

export const isUuid = (s: unknown): s is string => typeof s === 'string' && UUID_RE.test(s);
export const isUuidV4 = (s: unknown): s is string => typeof s === 'string' && UUID_V4_RE.test(s);

/** Namespace of every name-based id Motor derives (RFC 9562 v5). */
export const MOTOR_NAMESPACE = '6f1c8a52-3b7e-4d0a-9a43-2f6e8b1c5d70';

/** RFC 9562 UUID version 5 (SHA-1, name based): the same name always gives the same id. */
export function uuidV5(name: string, namespace: string = MOTOR_NAMESPACE): string {
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  const hash = createHash('sha1').update(ns).update(name, 'utf8').digest();
  hash[6] = (hash[6] & 0x0f) | 0x50;
  hash[8] = (hash[8] & 0x3f) | 0x80;
  const h = hash.subarray(0, 16).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** Ids and clock come into deciders as arguments; this is the production source of both. */
export interface Clock { now(): Date }
export const systemClock: Clock = { now: () => new Date() };
export const newId = (): string => randomUUID();
