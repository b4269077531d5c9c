import type { Redis } from 'ioredis';
import { RedisBatch } from '../../infra/redisBatch';

/**
 * The API request limit (SPEC "Limits", limiter 1): a fixed one-minute window per credential.
 * Independent of the send quota. When Redis cannot be asked the request goes on and
 * X-RateLimit-Remaining reads `unknown`.
 */

export type RequestLimitReading =
  | { kind: 'ok' | 'exceeded'; limit: number; remaining: number; resetSeconds: number }
  | { kind: 'unavailable'; limit: number };

const HIT = `
local v = redis.call('INCR', KEYS[1])
if v == 1 then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1])) end
return v
`;

/** The script as an ioredis command (defineCommand below), on a pipeline of the batch. */
interface HitCommand { motorRequestHit(key: string, ttl: number): unknown }

export class RequestLimiter {
  /** `batch`: hits go out with the other request-path commands of the loop turn (infra/redisBatch.ts); shared with the send quota. */
  constructor(private readonly redis: Redis, readonly limitPerMinute: number, private readonly batch = new RedisBatch(redis)) {
    // Sent once, then run by SHA.
    redis.defineCommand('motorRequestHit', { numberOfKeys: 1, lua: HIT });
  }

  /** The same counters with another limit (client-IP limiting of routes without a credential). */
  withLimit(limitPerMinute: number): RequestLimiter { return new RequestLimiter(this.redis, limitPerMinute, this.batch); }

  async hit(credentialId: string, now: Date): Promise<RequestLimitReading> {
    const window = Math.floor(now.getTime() / 60000);
    const resetSeconds = Math.max(1, (window + 1) * 60 - Math.floor(now.getTime() / 1000));
    try {
      const key = `reqlimit:{${credentialId}}:${window}`;
      const count = Number(await this.batch.call<number>((p) => (p as unknown as HitCommand).motorRequestHit(key, 120)));
      return { kind: count > this.limitPerMinute ? 'exceeded' : 'ok', limit: this.limitPerMinute, remaining: Math.max(0, this.limitPerMinute - count), resetSeconds };
    } catch {
      return { kind: 'unavailable', limit: this.limitPerMinute };
    }
  }
}
