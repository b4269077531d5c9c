import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { fail } from '../../domain/errors';

/**
 * One password check per address at a time, across every API process. The brute-force rules
 * (docs/AUTH.md) are decided on the user's stream, but a password check takes most of a second:
 * attempts sent at once would all pass the gate on the same state and each check its password.
 * So read → gate → check → record runs while the attempt holds the address's turn, a Redis key
 * (`SET NX` with an expiry, released by compare-and-delete), and every attempt sees the verdicts
 * of the ones before it.
 *
 * Waiting for the turn holds nothing: the key is tried, and tried again after a pause, until
 * `waitMs` has passed; then the attempt is refused as 429 `login_throttled` without checking its
 * password. A turn whose holder died lapses after `holdMs`. Unknown addresses take their turn the
 * same way (their id is derived from the address), so the work does not tell who exists. A Redis
 * error is tried again like a busy turn; only an attempt that never got an answer from Redis
 * within `waitMs` runs without a turn (fail open, as the request limiter); the verdict
 * is still decided on the stream as it is then, so the lock and the slowdown hold, only the number
 * of checks a burst gets is no longer bounded.
 */

export const LOGIN_TURN = {
  /** Long enough for one check on a loaded machine (scrypt is about 0.7 s on CI). */
  waitMs: 3000,
  /** A turn lapses after this long if its holder never gives it back (a crashed process). */
  holdMs: 15_000,
  firstPauseMs: 50,
  maxPauseMs: 500,
} as const;

const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

const busy = () => fail('login_throttled', 429, 'Another login for this address is being checked; retry in a moment', {
  details: { retryAfterSeconds: 1 },
});

export class LoginTurns {
  constructor(private readonly redis: Redis, private readonly prefix = 'motor', private readonly settings: typeof LOGIN_TURN = LOGIN_TURN) {}

  async run<T>(userId: string, attempt: () => Promise<T>): Promise<T> {
    const key = `${this.prefix}:login-turn:${userId}`;
    const token = randomBytes(16).toString('hex');
    const deadline = Date.now() + this.settings.waitMs;
    let heldByAnother = false;
    let errored = false;
    for (let tries = 0; ; tries++) {
      let taken = false;
      try {
        taken = (await this.redis.set(key, token, 'PX', this.settings.holdMs, 'NX')) === 'OK';
        // A SET that timed out on a busy Redis may have taken the key for this token after all.
        if (!taken && errored) taken = (await this.redis.get(key)) === token;
        heldByAnother ||= !taken;
      } catch {
        // Tried again like a busy turn; only when Redis never answered does the attempt run without one.
        errored = true;
      }
      if (taken) {
        try {
          return await attempt();
        } finally {
          await this.redis.eval(RELEASE, 1, key, token).catch(() => {});
        }
      }
      const pause = Math.min(this.settings.maxPauseMs, this.settings.firstPauseMs * 2 ** tries) * (0.5 + Math.random());
      if (Date.now() + pause > deadline) {
        if (heldByAnother) throw busy();
        return attempt();
      }
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}
