import type { Knex } from 'knex';
import { fail } from '../../domain/errors';

/**
 * One password check per address at a time, across every API process. The brute-force rules
 * (docs/AUTH.md) are decided on the user's stream, but a password check takes most of a second:
 * attempts sent at once would all pass the gate on the same state and each check its password.
 * So read → gate → check → record runs inside a transaction-scoped PostgreSQL advisory lock keyed
 * by the user id, and every attempt sees the verdicts of the ones before it.
 *
 * Waiting for the turn holds no connection: the lock is tried, and tried again after a pause, until
 * `waitMs` has passed; then the attempt is refused as 429 `login_throttled` without checking its
 * password. The turn's holder keeps one connection for its check. Unknown addresses take their
 * turn the same way (their id is derived from the address), so the work does not tell who exists.
 */

export const LOGIN_TURN = {
  /** Long enough for one check on a loaded machine (scrypt is about 0.7 s on CI). */
  waitMs: 3000,
  firstPauseMs: 50,
  maxPauseMs: 500,
} as const;

const NOT_YOUR_TURN = Symbol('notYourTurn');

const busy = () => fail('login_throttled', 429, 'Another login for this address is being checked; retry in a moment', {
  details: { retryAfterSeconds: 1 },
});

export async function inLoginTurn<T>(db: Knex, userId: string, attempt: () => Promise<T>, settings: typeof LOGIN_TURN = LOGIN_TURN): Promise<T> {
  const deadline = Date.now() + settings.waitMs;
  for (let tries = 0; ; tries++) {
    const r = await db.transaction(async (trx) => {
      const { rows } = await trx.raw('select pg_try_advisory_xact_lock(hashtextextended(?, 0)) as ok', [`motor.login:${userId}`]);
      return rows[0].ok ? attempt() : NOT_YOUR_TURN;
    });
    if (r !== NOT_YOUR_TURN) return r;
    const pause = Math.min(settings.maxPauseMs, settings.firstPauseMs * 2 ** tries) * (0.5 + Math.random());
    if (Date.now() + pause > deadline) throw busy();
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}
