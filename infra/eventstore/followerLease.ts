import type { Knex } from 'knex';
import type pg from 'pg';
import type { EventStore } from '../../domain/eventStore';
import type { Logger } from '../logger';
import type { Metrics } from '../metrics';
import { sleep } from '../sleep';
import { followLog, type LogFollower } from './followLog';

/**
 * One process at a time per log follower (the enqueuers, the webhook dispatcher, the pause
 * notices): every worker process runs them all, and without a lease each read the whole log and
 * did its work once per process, kept correct only by idempotency (stable job ids, Idempotency-Keys).
 *
 * The lease of follower `x` is the session advisory lock `motor.follower:x` (infra/db.ts names its
 * locks the same way), taken with try-lock. A process without it stands by and tries again every
 * LEASE_RETRY_MS. PostgreSQL releases the lock when the holder's session ends (its process killed
 * or crashed, its connection terminated), and a process standing by takes over from the shared
 * checkpoint row: at least once, as after a restart. The holder stops following as soon as its
 * session fails; the batch it is handling then may still finish while the next holder starts, which
 * the followers' idempotency covers (the lease saves repeated work, it is not what keeps them right).
 */

/** Between two tries of a process standing by, and between two checks of the holder's session. */
export const LEASE_RETRY_MS = 2000;

/** The advisory lock of a follower's lease. */
export const followerLockName = (follower: string): string => `motor.follower:${follower}`;

export type FollowerMetrics = Pick<Metrics, 'logFollowerLeader'>;

export interface LeaseDeps {
  /** The pool whose connection holds the leases. */
  db: Knex;
  store: EventStore;
  logger: Logger;
  /** motor_log_follower_leader; tests may go without. */
  metrics?: FollowerMetrics;
}

/**
 * The PostgreSQL session on which a process holds its followers' leases: one pooled connection for
 * all of them, kept while it holds any and given back to the pool when it holds none. A connection
 * per lease would keep six of the pool's ten (scripts/runtime.ts) for good in the process that leads,
 * which in a one-process deployment is also the API's and the projectors' pool. Its operations take
 * turns, so the connection is never given back while another lease's statement is on it.
 */
class LeaseSession {
  private conn: pg.Client | null = null;
  private detach: (() => void) | null = null;
  private readonly held = new Map<string, AbortController>();
  private turn: Promise<unknown> = Promise.resolve();

  constructor(private readonly db: Knex) {}

  /**
   * The lease of `name`: a signal aborted when it is lost, or null while another session holds it
   * (or another follower of that name in this process: the lock is re-entrant within a session).
   * Throws when the database cannot be reached.
   */
  take(name: string): Promise<AbortSignal | null> {
    return this.inTurn(async () => {
      if (this.held.has(name)) return null;
      const conn = this.conn ?? (await this.open());
      try {
        // Through knex, for its statement deadline: a session that no longer answers is ended.
        const { rows } = await this.db.raw('select pg_try_advisory_lock(hashtextextended(?, 0)) as ok', [followerLockName(name)]).connection(conn);
        // Not the session any more: it failed while the statement ran, and the lock went with it.
        if (!rows[0].ok || this.conn !== conn) return null;
        const lost = new AbortController();
        this.held.set(name, lost);
        return lost.signal;
      } finally {
        await this.closeIfIdle();
      }
    });
  }

  /** Gives the lease of `name` up (shutdown); the connection goes back to the pool with the last one. */
  give(name: string): Promise<void> {
    return this.inTurn(async () => {
      const conn = this.conn;
      if (!this.held.delete(name) || !conn) return;
      // A lock left on a pooled connection would keep the follower from every other process for as
      // long as the pool keeps the connection: the session is closed when the unlock does not go through.
      await this.db.raw('select pg_advisory_unlock(hashtextextended(?, 0)) as ok', [followerLockName(name)]).connection(conn)
        .catch(() => conn.end().catch(() => undefined));
      await this.closeIfIdle();
    });
  }

  /**
   * While leases are held, every LEASE_RETRY_MS: a statement on the session, within the pool's
   * deadline. A session whose server stopped answering (a host cut off) is ended by the deadline
   * and its followers stop, instead of following on for as long as the operating system keeps the
   * connection; the server side lets the lock go when it finds the session dead.
   */
  private check(): void {
    void this.inTurn(async () => {
      const conn = this.conn;
      if (!conn) return;
      await this.db.raw('select 1').connection(conn).catch((err) => {
        conn.end().catch(() => undefined);
        this.lose(conn, err);
      });
    });
  }

  private inTurn<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.turn.then(fn);
    this.turn = run.catch(() => undefined);
    return run;
  }

  private async open(): Promise<pg.Client> {
    const conn = (await this.db.client.acquireConnection()) as pg.Client;
    // knex marks the connection disposed on these too, so the pool drops it once it is given back.
    const failed = (err?: unknown) => this.lose(conn, err ?? new Error('lease session ended'));
    conn.on('error', failed);
    conn.on('end', failed);
    const timer = setInterval(() => this.check(), LEASE_RETRY_MS);
    timer.unref();
    this.detach = () => {
      conn.off('error', failed);
      conn.off('end', failed);
      clearInterval(timer);
    };
    this.conn = conn;
    return conn;
  }

  private async closeIfIdle(): Promise<void> {
    if (this.conn && this.held.size === 0) await this.release(this.conn);
  }

  private async release(conn: pg.Client): Promise<void> {
    if (this.conn !== conn) return;
    this.detach?.();
    this.detach = null;
    this.conn = null;
    await this.db.client.releaseConnection(conn);
  }

  /**
   * The session failed: PostgreSQL released its locks as it ended, so every follower on it stops
   * at once, as the first thing this process does on hearing of it.
   */
  private lose(conn: pg.Client, err: unknown): void {
    if (this.conn !== conn) return;
    for (const lost of this.held.values()) lost.abort(err);
    this.held.clear();
    void this.release(conn).catch(() => undefined);
  }
}

/** One lease session per pool (a process has one pool; a test may make several to play several processes). */
const sessions = new WeakMap<Knex, LeaseSession>();

function sessionOf(db: Knex): LeaseSession {
  let session = sessions.get(db);
  if (!session) sessions.set(db, (session = new LeaseSession(db)));
  return session;
}

/**
 * followLog in one process at a time: stands by until it holds the follower's lease, follows the
 * log while it does, and stands by again when it loses it. Runs until `signal` aborts, then gives
 * the lease up (the next holder need not wait for this process's session to end).
 */
export async function followLogAlone(deps: LeaseDeps, follower: LogFollower, signal: AbortSignal): Promise<void> {
  const session = sessionOf(deps.db);
  const log = { follower: follower.name };
  const leading = (on: boolean) => deps.metrics?.logFollowerLeader.set(log, on ? 1 : 0);
  leading(false);
  let failing = false;
  while (!signal.aborted) {
    let lease: AbortSignal | null = null;
    try {
      lease = await session.take(follower.name);
      failing = false;
    } catch (err) {
      // Once per outage: the database being down is logged by everything else that uses it.
      if (!failing) deps.logger.warn({ err, ...log }, 'could not try to take a log follower\'s lease; standing by');
      failing = true;
    }
    if (!lease) {
      await sleep(follower.leaseRetryMs ?? LEASE_RETRY_MS, signal);
      continue;
    }
    deps.logger.info(log, 'took a log follower\'s lease: it follows the log in this process');
    leading(true);
    await followWhileHeld(deps, follower, lease, signal);
    await follower.stopped?.().catch((err) => deps.logger.warn({ err, ...log }, 'a log follower could not write its checkpoint as it stopped'));
    leading(false);
    if (signal.aborted) {
      await session.give(follower.name).catch(() => undefined);
      return;
    }
    deps.logger.warn({ err: lease.reason, ...log }, 'lost a log follower\'s lease (its session ended): stopped following, standing by');
    // Longer than the others' retry interval: a process whose session failed may well see it fail
    // again, and one standing by takes over first.
    await sleep(2 * (follower.leaseRetryMs ?? LEASE_RETRY_MS), signal);
  }
}

/** Follows until the lease is lost or `signal` aborts. */
async function followWhileHeld(deps: LeaseDeps, follower: LogFollower, lease: AbortSignal, signal: AbortSignal): Promise<void> {
  const run = new AbortController();
  const stop = () => run.abort();
  signal.addEventListener('abort', stop, { once: true });
  lease.addEventListener('abort', stop, { once: true });
  if (signal.aborted || lease.aborted) stop();
  try {
    await followLog(deps.store, deps.logger, follower, run.signal);
  } finally {
    signal.removeEventListener('abort', stop);
    lease.removeEventListener('abort', stop);
  }
}
