import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * Slows down repeated SMTP AUTH failures, shared by every listener process through Redis.
 *
 * Failures are counted per client address and per username over a sliding window (`windowSeconds`,
 * reset by each new failure). Once a counter reaches `freeFailures`, every AUTH from that address
 * (or for that username) waits before its answer: `baseDelayMs` doubling per further failure, up
 * to `maxDelayMs`; success and failure wait alike, so a client cannot hang up early to learn the
 * verdict. At `lockoutFailures` from one address, AUTH is refused without checking the password
 * until the window passes. Usernames are only slowed down, never locked: a lock by username would
 * let anyone lock a block out of SMTP. SMTP passwords are 190-bit random strings, so this guards
 * the service's resources and logs, not the secret.
 *
 * When Redis cannot be asked, AUTH goes on without a delay (fail open, like the send quota).
 */

/**
 * A client address as the counters and the listener key it: the IPv4-mapped prefix of a dual-stack
 * listener removed (smtp-server reports session.remoteAddress with it).
 */
export const normalizeAddress = (a: string | undefined): string => (a ?? '').replace(/^::ffff:/i, '').toLowerCase();

export interface AuthLimiterSettings {
  windowSeconds: number;
  freeFailures: number;
  baseDelayMs: number;
  maxDelayMs: number;
  lockoutFailures: number;
}

export const DEFAULT_AUTH_LIMITS: AuthLimiterSettings = {
  windowSeconds: 900,
  freeFailures: 3,
  baseDelayMs: 250,
  maxDelayMs: 5000,
  lockoutFailures: 20,
};

export type AuthGate =
  | { kind: 'open'; delayMs: number }
  | { kind: 'locked'; retryAfterSeconds: number };

/** Pure: the gate for the given failure counts. */
export function gateFor(ipFailures: number, userFailures: number, ttlSeconds: number, s: AuthLimiterSettings): AuthGate {
  if (ipFailures >= s.lockoutFailures) return { kind: 'locked', retryAfterSeconds: Math.max(1, ttlSeconds) };
  const n = Math.max(ipFailures, userFailures);
  if (n < s.freeFailures) return { kind: 'open', delayMs: 0 };
  return { kind: 'open', delayMs: Math.min(s.maxDelayMs, s.baseDelayMs * 2 ** (n - s.freeFailures)) };
}

export class AuthLimiter {
  constructor(
    private readonly redis: Redis,
    readonly settings: AuthLimiterSettings = DEFAULT_AUTH_LIMITS,
    private readonly prefix = 'motor:smtp:authfail',
  ) {}

  private keys(ip: string, username: string): [string, string] {
    const user = createHash('sha256').update(username.toLowerCase()).digest('hex').slice(0, 32);
    return [`${this.prefix}:ip:${ip}`, `${this.prefix}:user:${user}`];
  }

  async gate(ip: string, username: string): Promise<AuthGate> {
    const [ipKey, userKey] = this.keys(ip, username);
    try {
      const r = await this.redis.multi().get(ipKey).get(userKey).ttl(ipKey).exec();
      if (!r) return { kind: 'open', delayMs: 0 };
      const [ipN, userN, ttl] = r.map(([, v]) => Number(v ?? 0));
      return gateFor(ipN, userN, ttl, this.settings);
    } catch {
      return { kind: 'open', delayMs: 0 };
    }
  }

  async recordFailure(ip: string, username: string): Promise<void> {
    const [ipKey, userKey] = this.keys(ip, username);
    const w = this.settings.windowSeconds;
    await this.redis.multi().incr(ipKey).expire(ipKey, w).incr(userKey).expire(userKey, w).exec().catch(() => null);
  }

  /** A successful login clears its address's count (the username's count stays: it may be under attack from elsewhere). */
  async recordSuccess(ip: string): Promise<void> {
    const [ipKey] = this.keys(ip, '');
    await this.redis.del(ipKey).catch(() => 0);
  }
}
