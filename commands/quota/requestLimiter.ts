import type { Redis } from 'ioredis';
import { RedisBatch } from '../../infra/redisBatch';

/**
 * The API request limit (SPEC "Limits", limiter 1): a fixed one-minute window per credential.
 * Independent of the send quota. When Redis cannot be asked the request goes on and
 * X-RateLimit-Remaining reads `unknown`; the window is the clock's, so its reset is still known.
 */

export type RequestLimitReading =
  | { kind: 'ok' | 'exceeded'; limit: number; remaining: number; resetSeconds: number }
  | { kind: 'unavailable'; limit: number; resetSeconds: number };

/** K: the window's counter, kept two minutes. Runs in the batch's script (infra/redisBatch.ts). */
const HIT = {
  keys: 1,
  args: 0,
  lua: `
local v = redis.call('INCR', K[1])
if v == 1 then redis.call('EXPIRE', K[1], 120) end
return {v}
`,
};

export class RequestLimiter {
  /** `batch`: hits go out with the other request-path commands of the loop turn (infra/redisBatch.ts); shared with the send quota. */
  constructor(private readonly redis: Redis, readonly limitPerMinute: number, private readonly batch = new RedisBatch(redis)) {
    batch.define('requestHit', HIT);
  }

  /** The same counters with another limit (client-IP limiting of routes without a credential). */
  withLimit(limitPerMinute: number): RequestLimiter { return new RequestLimiter(this.redis, limitPerMinute, this.batch); }

  async hit(credentialId: string, now: Date): Promise<RequestLimitReading> {
    const window = Math.floor(now.getTime() / 60000);
    const resetSeconds = Math.max(1, (window + 1) * 60 - Math.floor(now.getTime() / 1000));
    try {
      const key = `reqlimit:{${credentialId}}:${window}`;
      const [count] = await this.batch.run('requestHit', [key], []);
      return { kind: count > this.limitPerMinute ? 'exceeded' : 'ok', limit: this.limitPerMinute, remaining: Math.max(0, this.limitPerMinute - count), resetSeconds };
    } catch {
      return { kind: 'unavailable', limit: this.limitPerMinute, resetSeconds };
    }
  }
}
