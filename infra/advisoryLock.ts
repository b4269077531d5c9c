import type { Knex } from 'knex';
import { sleep } from './sleep';

/** How the lock's name becomes its key: `hashtextextended(name, 0)` (bigint), or `hashtext(name)` for the locks first taken so. */
export type LockHash = 'hashtextextended' | 'hashtext';

export interface TurnOptions {
  /** Longest wait for the lock, tries included; then `busy()` is thrown. 0: one try, refused at once. */
  waitMs: number;
  /** What is thrown when the lock was not had within `waitMs` (nothing of `fn` ran). */
  busy: () => Error;
  /** Default `hashtextextended`. Processes of one deployment must agree on it for a given name. */
  hash?: LockHash;
}

const NOT_TAKEN = Symbol('not taken');

/**
 * Runs `fn` in a transaction that holds the transaction-scoped advisory lock `name`, so that the
 * callers of one name take turns across every process; the lock goes with the transaction's end.
 *
 * Waiting holds no pooled connection. A caller blocked in `pg_advisory_xact_lock` would keep its
 * connection for the whole wait: a burst of requests for one name (twelve webhook creates on one
 * block at once) would then hold every connection of the process's pool, and the lock holder's
 * own wait for a projector, which needs one, would go unanswered until the deadlines cut everyone
 * (503 for all but the first). Here each try is `pg_try_advisory_xact_lock` in a transaction of
 * its own, which gives its connection back at once when the lock is taken, and the next try comes
 * after a short random pause (up to 5 ms, doubling to 100 ms). Turns are not taken in order of
 * arrival; within `waitMs` every caller gets one in practice, and one that does not is refused
 * with `busy()`, not left waiting.
 */
export async function withTurn<T>(db: Knex, name: string, options: TurnOptions, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  const sql = options.hash === 'hashtext'
    ? 'SELECT pg_try_advisory_xact_lock(hashtext(?)) AS taken'
    : 'SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS taken';
  const deadline = Date.now() + options.waitMs;
  for (let pauseMs = 5; ; pauseMs = Math.min(pauseMs * 2, 100)) {
    const result = await db.transaction(async (trx) => {
      const { rows } = (await trx.raw(sql, [name])) as { rows: Array<{ taken: boolean }> };
      if (!rows[0].taken) return NOT_TAKEN;
      return { value: await fn(trx) };
    });
    if (result !== NOT_TAKEN) return result.value;
    const pause = Math.random() * pauseMs;
    if (Date.now() + pause > deadline) throw options.busy();
    await sleep(pause);
  }
}
