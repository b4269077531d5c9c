import type { Redis } from 'ioredis';
import { RedisBatch } from '../../infra/redisBatch';

/**
 * The send volume quota (SPEC "Limits"): burst, hourly and daily ceilings per Motor Block, hourly
 * and daily counters per account, and a daily counter per sending domain (the warm-up buffer, shared
 * by every block sending from the domain; docs/ANALYTICS.md "Warm-up"). One atomic Lua script checks every ceiling and charges
 * all counters only when all pass; HTTP sends and SMTP submissions both call consume(), so they
 * draw on the same counters.
 *
 * Windows are fixed and aligned: burst = the current UTC minute, hourly = the UTC hour, daily =
 * the UTC day.
 *
 * A send with more recipients than a ceiling's limit can never fit that ceiling, whatever the
 * counters say: `recipientCeiling` gives the smallest such limit, which the send path refuses
 * permanently before consume() is asked (commands/send/sendMessage.ts) and the SMTP listener
 * enforces per transaction at RCPT TO (smtp/listener.ts).
 */

export type QuotaDimension = 'burst' | 'hourly' | 'daily' | 'acct_hourly' | 'acct_daily' | 'warmup';

export interface Ceiling { burst: number; hourly: number; daily: number }
export interface AccountCeiling { hourly: number; daily: number }

export interface QuotaRequest {
  motorBlockId: string;
  accountId: string;
  /** The sending domain as read at send time: its daily counter is the warm-up buffer. */
  domainId: string;
  count: number;
  /** Effective block ceiling (configured limits, lowered by any reputation throttle). */
  block: Ceiling;
  account: AccountCeiling;
  /** Refuse over the account ceiling (rolling out: off = measured only). */
  enforceAccount: boolean;
  /** Today's warm-up cap of the domain when it is enforced and binding, else null (counted only). */
  warmupCap: number | null;
  now: Date;
}

export interface BucketReading { used: number; limit: number; remaining: number; resetIn: number }

export type QuotaDecision =
  | {
    kind: 'allowed'; block: Record<'burst' | 'hourly' | 'daily', BucketReading>; account: Record<'hourly' | 'daily', BucketReading>; domainDaily: number;
    /**
     * The block's effective daily ceiling, as GET .../rate-limits shows it: the block's daily
     * bucket, or while the warm-up cap binds, the domain's buffer (the cap, the domain's count).
     */
    effectiveDaily: BucketReading;
  }
  /** The binding refusal: of the ceilings that refuse, the one whose window resets last. */
  | { kind: 'denied'; dimension: QuotaDimension; used: number; limit: number; retryAfterSeconds: number }
  /** Redis could not be asked: the send goes on without numbers (SPEC: absent headers = unknown). */
  | { kind: 'unavailable' };

const WINDOWS = { burst: 60, hourly: 3600, daily: 86400 } as const;

export function windowStart(now: Date, seconds: number): number {
  return Math.floor(now.getTime() / 1000 / seconds) * seconds;
}
export function resetIn(now: Date, seconds: number): number {
  return Math.max(1, windowStart(now, seconds) + seconds - Math.floor(now.getTime() / 1000));
}

/**
 * Block minute/hour/day, account hour/day, and (with a domain id) the domain's UTC-day counter.
 * CONSUME builds the same names in Lua: change both together (test/infra/redisBatch.int.test.ts reads a charge back through these).
 */
export function quotaKeys(motorBlockId: string, accountId: string, now: Date, domainId?: string): string[] {
  const b = `quota:block:{${motorBlockId}}`;
  const a = `quota:acct:{${accountId}}`;
  const keys = [
    `${b}:m:${windowStart(now, WINDOWS.burst)}`,
    `${b}:h:${windowStart(now, WINDOWS.hourly)}`,
    `${b}:d:${windowStart(now, WINDOWS.daily)}`,
    `${a}:h:${windowStart(now, WINDOWS.hourly)}`,
    `${a}:d:${windowStart(now, WINDOWS.daily)}`,
  ];
  if (domainId !== undefined) keys.push(`quota:domain:{${domainId}}:d:${windowStart(now, WINDOWS.daily)}`);
  return keys;
}

/** The counters' times to live: a little past their window, so a reader near the boundary still sees the count. */
const TTL = { burst: WINDOWS.burst + 60, hourly: WINDOWS.hourly + 300, daily: WINDOWS.daily + 3600 };

// Runs in the batch's script (infra/redisBatch.ts). The keys are those of quotaKeys(), built in Lua
// from the ids and the time: twelve short arguments cost the client less than six keys and eleven.
// A: blockId, accountId, domainId, now (Unix seconds), n, burstLimit, hourlyLimit, dailyLimit,
//    acctHourlyLimit, acctDailyLimit, enforceAccount, warmupCap (-1: none)
// Returns {1, b, h, d, ah, ad, dd} after charging, or {0, index, used, index, used, ...} for every
// ceiling that refuses (the caller picks the binding one): a client told only of the first would
// retry when it resets and be refused by the next.
const CONSUME = {
  keys: 0,
  args: 12,
  lua: `
local now = tonumber(A[4])
local function at(seconds) return string.format('%d', now - now % seconds) end
local b, a = 'quota:block:{' .. A[1] .. '}', 'quota:acct:{' .. A[2] .. '}'
local day = at(86400)
local K = {b .. ':m:' .. at(60), b .. ':h:' .. at(3600), b .. ':d:' .. day, a .. ':h:' .. at(3600), a .. ':d:' .. day, 'quota:domain:{' .. A[3] .. '}:d:' .. day}
local n = tonumber(A[5])
local used = {}
for i = 1, 6 do used[i] = tonumber(redis.call('GET', K[i]) or '0') end
local cap = tonumber(A[12])
local limit = {tonumber(A[6]), tonumber(A[7]), tonumber(A[8]), tonumber(A[9]), tonumber(A[10]), cap}
local checked = {true, true, true, A[11] == '1', A[11] == '1', cap >= 0}
local refused = {0}
for i = 1, 6 do
  if checked[i] and used[i] + n > limit[i] then
    refused[#refused + 1] = i
    refused[#refused + 1] = used[i]
  end
end
if #refused > 1 then return refused end
local ttl = {${TTL.burst}, ${TTL.hourly}, ${TTL.daily}, ${TTL.hourly}, ${TTL.daily}, ${TTL.daily}}
for i = 1, 6 do
  used[i] = redis.call('INCRBY', K[i], n)
  if used[i] == n then redis.call('EXPIRE', K[i], ttl[i]) end
end
return {1, used[1], used[2], used[3], used[4], used[5], used[6]}
`,
};

const REFUND = `
for i = 1, #KEYS do
  local v = redis.call('DECRBY', KEYS[i], tonumber(ARGV[1]))
  if v < 0 then redis.call('SET', KEYS[i], 0, 'KEEPTTL') end
end
return 1
`;

const READ = `
local out = {}
for i = 1, #KEYS do out[i] = tonumber(redis.call('GET', KEYS[i]) or '0') end
return out
`;

const DIMENSIONS: QuotaDimension[] = ['burst', 'hourly', 'daily', 'acct_hourly', 'acct_daily', 'warmup'];
const DIM_SECONDS: Record<QuotaDimension, number> = { burst: 60, hourly: 3600, daily: 86400, acct_hourly: 3600, acct_daily: 86400, warmup: 86400 };
/** Between refusals whose windows end together: the block's before the warm-up buffer's, both before the account's. */
const TIE_ORDER: QuotaDimension[] = ['burst', 'hourly', 'daily', 'warmup', 'acct_hourly', 'acct_daily'];

/**
 * Of the refusing ceilings, the binding one: its window resets last (SPEC "429 contract": the 429
 * reports the binding dimension), so a client that waits its Retry-After is not refused by another.
 * Windows are aligned, so a longer window never resets before a shorter one; on a tie the longer
 * window is named, then TIE_ORDER decides.
 */
export function bindingRefusal<T extends { dimension: QuotaDimension }>(refusals: T[], now: Date): T {
  const rank = (r: T) => [resetIn(now, DIM_SECONDS[r.dimension]), DIM_SECONDS[r.dimension], -TIE_ORDER.indexOf(r.dimension)];
  return refusals.reduce((best, r) => {
    const [a, b] = [rank(r), rank(best)];
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] > b[i] ? r : best;
    return best;
  });
}

export type CeilingDimension = Exclude<QuotaDimension, 'warmup'>;
export interface RecipientCeiling { dimension: CeilingDimension; limit: number }

/**
 * The most recipients one send (one SMTP transaction) can ever have: the smallest of the block's
 * effective ceilings and, when they are enforced, the account's (ties: the shorter window). A send
 * over it is refused by that ceiling in every window, so it is a permanent refusal, never a 429.
 * The warm-up cap is not among them: it grows day by day, so waiting for it is a real retry.
 */
export function recipientCeiling(block: Ceiling, account: AccountCeiling, enforceAccount: boolean): RecipientCeiling {
  const candidates: RecipientCeiling[] = [
    { dimension: 'burst', limit: block.burst }, { dimension: 'hourly', limit: block.hourly }, { dimension: 'daily', limit: block.daily },
    ...(enforceAccount ? [{ dimension: 'acct_hourly' as const, limit: account.hourly }, { dimension: 'acct_daily' as const, limit: account.daily }] : []),
  ];
  return candidates.reduce((min, c) => (c.limit < min.limit ? c : min));
}

/** The scripts as ioredis commands: sent once, then run by SHA (EVALSHA, reloaded if Redis forgot them). */
interface QuotaCommands {
  motorQuotaRefund(...args: (string | number)[]): Promise<number>;
  motorQuotaRead(...args: (string | number)[]): Promise<number[]>;
}

export class SendQuota {
  private readonly commands: QuotaCommands;

  /** `batch`: consume() goes out with the other request-path commands of the loop turn (infra/redisBatch.ts); shared with the request limiter. */
  constructor(redis: Redis, private readonly batch = new RedisBatch(redis)) {
    batch.define('quotaConsume', CONSUME);
    redis.defineCommand('motorQuotaRefund', { numberOfKeys: 6, lua: REFUND });
    redis.defineCommand('motorQuotaRead', { numberOfKeys: 6, lua: READ });
    this.commands = redis as unknown as QuotaCommands;
  }

  async consume(req: QuotaRequest): Promise<QuotaDecision> {
    let reply: number[];
    try {
      reply = await this.batch.run('quotaConsume', [], [
        req.motorBlockId, req.accountId, req.domainId, Math.floor(req.now.getTime() / 1000),
        req.count, req.block.burst, req.block.hourly, req.block.daily, req.account.hourly, req.account.daily,
        req.enforceAccount ? '1' : '0', req.warmupCap ?? -1,
      ]);
    } catch {
      return { kind: 'unavailable' };
    }
    if (reply[0] === 0) {
      const limits = [req.block.burst, req.block.hourly, req.block.daily, req.account.hourly, req.account.daily, req.warmupCap ?? 0];
      const refusals = [];
      for (let i = 1; i + 1 < reply.length; i += 2) {
        const dimension = DIMENSIONS[reply[i] - 1];
        refusals.push({ kind: 'denied' as const, dimension, used: reply[i + 1], limit: limits[reply[i] - 1], retryAfterSeconds: resetIn(req.now, DIM_SECONDS[dimension]) });
      }
      return bindingRefusal(refusals, req.now);
    }
    const reading = (used: number, limit: number, seconds: number): BucketReading => ({
      used, limit, remaining: Math.max(0, limit - used), resetIn: resetIn(req.now, seconds),
    });
    const daily = reading(reply[3], req.block.daily, WINDOWS.daily);
    return {
      kind: 'allowed',
      block: {
        burst: reading(reply[1], req.block.burst, WINDOWS.burst),
        hourly: reading(reply[2], req.block.hourly, WINDOWS.hourly),
        daily,
      },
      account: { hourly: reading(reply[4], req.account.hourly, WINDOWS.hourly), daily: reading(reply[5], req.account.daily, WINDOWS.daily) },
      domainDaily: reply[6],
      // The same bucket as GET .../rate-limits' daily (read-api/controllers/RateLimitsController.ts).
      effectiveDaily: req.warmupCap !== null && req.warmupCap < req.block.daily ? reading(reply[6], req.warmupCap, WINDOWS.daily) : daily,
    };
  }

  /** Gives back a charge whose send was not committed (store down, lost an idempotency race). */
  async refund(motorBlockId: string, accountId: string, count: number, chargedAt: Date, domainId: string): Promise<void> {
    try {
      await this.commands.motorQuotaRefund(...quotaKeys(motorBlockId, accountId, chargedAt, domainId), count);
    } catch {
      // Best effort: an unrefunded charge expires with its window.
    }
  }

  /** Current counters without charging (rate-limits routes). Null when Redis is unavailable. */
  async read(
    motorBlockId: string, accountId: string, now: Date, domainId?: string | null,
  ): Promise<{ burst: number; hourly: number; daily: number; acctHourly: number; acctDaily: number; domainDaily: number } | null> {
    try {
      // Without a domain the sixth key is a name nothing writes (reads 0).
      const r = await this.commands.motorQuotaRead(...quotaKeys(motorBlockId, accountId, now, domainId ?? 'none'));
      return { burst: r[0], hourly: r[1], daily: r[2], acctHourly: r[3], acctDaily: r[4], domainDaily: r[5] };
    } catch {
      return null;
    }
  }
}
