import { createHash, randomUUID } from 'node:crypto';
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
 * The lock holds against a burst. Reading the count before the check and writing it after let
 * every attempt sent at the same moment pass on the same count (30 at once: 30 checks). So an
 * attempt takes a slot of its address before its password is looked at, in one script with the
 * lock check: it gets one only while the address's failures plus the attempts still in progress
 * are under `lockoutFailures`, so at most that many passwords are ever checked in a window. An
 * attempt that finds no free slot waits for one (up to `slotWaitMs`): the attempts in progress
 * either fail, and the address is locked, or succeed and give their slot back. A slot whose holder
 * died lapses after `slotLeaseMs`.
 *
 * A success clears its address's failures, but only those recorded before its slot was taken:
 * failures of attempts that ran alongside it stay counted (a plain reset would wipe a lock those
 * earned while the success was being checked).
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
  /** How long an attempt waits for a free slot of its address before it is refused. */
  slotWaitMs: number;
  /** A slot lapses after this long if its attempt never settles (a crashed process). */
  slotLeaseMs: number;
}

export const DEFAULT_AUTH_LIMITS: AuthLimiterSettings = {
  windowSeconds: 900,
  freeFailures: 3,
  baseDelayMs: 250,
  maxDelayMs: 5000,
  lockoutFailures: 20,
  // Enough for the attempts holding the slots to sit out the longest slowdown and be answered.
  slotWaitMs: 6000,
  // Longer than any attempt may take: the AUTH hook's deadline (15 s) plus the slowdown.
  slotLeaseMs: 30_000,
};

/** The rule for the given failure counts (pure): locked, or open after a delay. */
export type GateRule =
  | { kind: 'open'; delayMs: number }
  | { kind: 'locked'; retryAfterSeconds: number };

/** One attempt's slot: settled by recordFailure, recordSuccess or release. */
export interface AuthTicket {
  id: string;
  ip: string;
  username: string;
  /** The address's failure total (and the counter's generation) when the slot was taken: what a success may clear. */
  seenTotal: number;
  seenGeneration: string;
}

export type AuthGate =
  | { kind: 'open'; delayMs: number; ticket: AuthTicket }
  | { kind: 'locked'; retryAfterSeconds: number }
  /** No slot came free within slotWaitMs: the address's attempts in progress fill what is left under the lock. */
  | { kind: 'busy' };

/** Pure: the gate for the given failure counts. */
export function gateFor(ipFailures: number, userFailures: number, ttlSeconds: number, s: AuthLimiterSettings): GateRule {
  if (ipFailures >= s.lockoutFailures) return { kind: 'locked', retryAfterSeconds: Math.max(1, ttlSeconds) };
  const n = Math.max(ipFailures, userFailures);
  if (n < s.freeFailures) return { kind: 'open', delayMs: 0 };
  return { kind: 'open', delayMs: Math.min(s.maxDelayMs, s.baseDelayMs * 2 ** (n - s.freeFailures)) };
}

/*
 * The address's counter is a hash: `failures` (recorded in the window), `cleared` (how many of
 * them successes have cleared), `gen` (set when the hash is created, so a success never clears a
 * later window's failures). Its slots are a sorted set of attempt ids scored by lease expiry (Redis
 * time, the same for every process). The username's counter is a plain count.
 *
 * TAKE: KEYS ipHash, ipSlots, userKey; ARGV ticket, leaseMs, lockoutFailures.
 * Answers {verdict (0 locked, 1 busy, 2 taken), address failures, username failures, ttl, total, gen}.
 */
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local h = redis.call('HMGET', KEYS[1], 'failures', 'cleared', 'gen')
local total = tonumber(h[1]) or 0
local counted = total - (tonumber(h[2]) or 0)
local gen = h[3] or ''
local ttl = redis.call('TTL', KEYS[1])
local user = tonumber(redis.call('GET', KEYS[3])) or 0
if counted >= tonumber(ARGV[3]) then return {0, counted, user, ttl, total, gen} end
if counted + redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return {1, counted, user, ttl, total, gen} end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
return {2, counted, user, ttl, total, gen}
`;

/* FAIL: KEYS ipHash, ipSlots, userKey; ARGV ticket, windowSeconds, a new generation id. */
const FAIL = `
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'failures', 1)
redis.call('HSETNX', KEYS[1], 'gen', ARGV[3])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
redis.call('INCR', KEYS[3])
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[2]))
return 1
`;

/* SUCCEED: KEYS ipHash, ipSlots; ARGV ticket, seenTotal, seenGeneration. */
const SUCCEED = `
redis.call('ZREM', KEYS[2], ARGV[1])
if ARGV[3] ~= '' and redis.call('HGET', KEYS[1], 'gen') == ARGV[3] then
  local cleared = tonumber(redis.call('HGET', KEYS[1], 'cleared')) or 0
  if tonumber(ARGV[2]) > cleared then redis.call('HSET', KEYS[1], 'cleared', ARGV[2]) end
end
return 1
`;

/** The scripts as ioredis commands: sent once, then run by SHA. */
interface LimiterCommands {
  motorSmtpAuthTake(ipKey: string, slotsKey: string, userKey: string, ticket: string, leaseMs: number, lockout: number): Promise<[number, number, number, number, number, string]>;
  motorSmtpAuthFail(ipKey: string, slotsKey: string, userKey: string, ticket: string, windowSeconds: number, generation: string): Promise<number>;
  motorSmtpAuthSucceed(ipKey: string, slotsKey: string, ticket: string, seenTotal: number, seenGeneration: string): Promise<number>;
}

const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class AuthLimiter {
  private readonly commands: LimiterCommands;

  constructor(
    private readonly redis: Redis,
    readonly settings: AuthLimiterSettings = DEFAULT_AUTH_LIMITS,
    private readonly prefix = 'motor:smtp:authfail',
  ) {
    redis.defineCommand('motorSmtpAuthTake', { numberOfKeys: 3, lua: TAKE });
    redis.defineCommand('motorSmtpAuthFail', { numberOfKeys: 3, lua: FAIL });
    redis.defineCommand('motorSmtpAuthSucceed', { numberOfKeys: 2, lua: SUCCEED });
    this.commands = redis as unknown as LimiterCommands;
  }

  private keys(ip: string, username: string): { ip: string; slots: string; user: string } {
    const user = createHash('sha256').update(username.toLowerCase()).digest('hex').slice(0, 32);
    // `addr:`, not the string counters' `ip:` of before: a listener of the old version next to this one finds no key of the wrong type.
    return { ip: `${this.prefix}:addr:${ip}`, slots: `${this.prefix}:addr:${ip}:slots`, user: `${this.prefix}:user:${user}` };
  }

  /**
   * Locked, or a slot for the attempt and its delay; waits while the address's slots are all
   * taken. The slot must be settled (recordFailure, recordSuccess or release).
   */
  async gate(ip: string, username: string): Promise<AuthGate> {
    const k = this.keys(ip, username);
    const id = randomUUID();
    const unreserved: AuthGate = { kind: 'open', delayMs: 0, ticket: { id, ip, username, seenTotal: 0, seenGeneration: '' } };
    const deadline = Date.now() + this.settings.slotWaitMs;
    for (let tries = 0; ; tries++) {
      let r: [number, number, number, number, number, string];
      try {
        r = await this.commands.motorSmtpAuthTake(k.ip, k.slots, k.user, id, this.settings.slotLeaseMs, this.settings.lockoutFailures);
      } catch {
        return unreserved;
      }
      const [verdict, ipN, userN, ttl, total, generation] = r;
      if (verdict === 0) return { kind: 'locked', retryAfterSeconds: Math.max(1, Number(ttl)) };
      if (verdict === 2) {
        const rule = gateFor(Number(ipN), Number(userN), Number(ttl), this.settings);
        const delayMs = rule.kind === 'open' ? rule.delayMs : 0;
        return { kind: 'open', delayMs, ticket: { id, ip, username, seenTotal: Number(total), seenGeneration: String(generation) } };
      }
      // Busy: the attempts in progress will fail (then the address is locked) or give their slot back.
      const wait = Math.min(200, 20 * 2 ** tries) * (0.5 + Math.random());
      if (Date.now() + wait > deadline) return { kind: 'busy' };
      await pause(wait);
    }
  }

  async recordFailure(t: AuthTicket): Promise<void> {
    const k = this.keys(t.ip, t.username);
    await this.commands.motorSmtpAuthFail(k.ip, k.slots, k.user, t.id, this.settings.windowSeconds, randomUUID()).catch(() => 0);
  }

  /**
   * A successful login clears its address's failures recorded before it took its slot (the
   * username's count stays: it may be under attack from elsewhere).
   */
  async recordSuccess(t: AuthTicket): Promise<void> {
    const k = this.keys(t.ip, t.username);
    await this.commands.motorSmtpAuthSucceed(k.ip, k.slots, t.id, t.seenTotal, t.seenGeneration).catch(() => 0);
  }

  /** Gives the slot back without a verdict (the check itself failed: store or directory down). */
  async release(t: AuthTicket): Promise<void> {
    await this.redis.zrem(this.keys(t.ip, t.username).slots, t.id).catch(() => 0);
  }

  /** The address's failures counted now (what the lock compares with `lockoutFailures`). */
  async addressFailures(ip: string): Promise<number> {
    const [failures, cleared] = await this.redis.hmget(this.keys(ip, '').ip, 'failures', 'cleared');
    return Number(failures ?? 0) - Number(cleared ?? 0);
  }
}
