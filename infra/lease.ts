import type { Knex } from 'knex';
import type pg from 'pg';
import { sleep } from './sleep';

/**
 * One process at a time for work that every process of a role starts: the log followers of the
 * worker role (infra/eventstore/followerLease.ts) and the projections of the projector role
 * (projections/runner.ts runAlone). Without a lease each process did all of that work, kept
 * correct by idempotency or by the projections' checkpoint compare-and-set, but done once per
 * process.
 *
 * A lease is a PostgreSQL session advisory lock named by its holder's kind and name
 * (`motor.follower:<name>`, `motor.projector:<name>`), keyed by hashtextextended(name, 0), taken
 * with try-lock. A process without it stands by and tries again every LEASE_RETRY_MS. PostgreSQL
 * releases the lock when the holder's session ends (its process killed or crashed, its connection
 * terminated), and a process standing by takes over from the work's own shared checkpoint. The
 * holder stops as soon as its session fails; the batch it is handling then may still finish while
 * the next holder starts, which each kind of work must allow for (the lease saves repeated work,
 * it is not what keeps the work right).
 */

/** Between two tries of a process standing by, and between two checks of the holder's session. */
export const LEASE_RETRY_MS = 2000;

/**
 * How long the server lets a lease session sit idle before it ends it (PostgreSQL 14+
 * `idle_session_timeout`, set on that session only). The holder sends a statement every
 * LEASE_RETRY_MS, so a live holder is never idle that long; a holder cut off from the server
 * (its host frozen or partitioned, the connection never closed) is, and the server then ends the
 * session and lets its locks go within this time, rather than after TCP keepalive finds the peer
 * gone (two hours with Linux defaults), which would leave the work undone that long.
 */
export const LEASE_IDLE_TIMEOUT_MS = 20_000;

/** pino-compatible subset (the projections' logger is one). */
export interface LeaseLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

/**
 * The PostgreSQL session on which a process holds its leases: one pooled connection for all of
 * them, kept while it holds any and given back to the pool when it holds none. A connection per
 * lease would keep most of the pool's ten (scripts/runtime.ts) for good in the process that leads
 * (six followers, more than a dozen projections), which in a one-process deployment is also the
 * API's pool. Its operations take turns, so the connection is never given back while another
 * lease's statement is on it.
 */
class LeaseSession {
  private conn: pg.Client | null = null;
  private detach: (() => void) | null = null;
  private readonly held = new Map<string, AbortController>();
  /** The session whose idle_session_timeout was set (open), to be reset before it goes back to the pool. */
  private readonly idleBounded = new WeakSet<pg.Client>();
  private turn: Promise<unknown> = Promise.resolve();

  constructor(private readonly db: Knex) {}

  /**
   * The lease `lock`: a signal aborted when it is lost, or null while another session holds it
   * (or another holder of that lock in this process: the lock is re-entrant within a session).
   * Throws when the database cannot be reached.
   */
  take(lock: string): Promise<AbortSignal | null> {
    return this.inTurn(async () => {
      if (this.held.has(lock)) return null;
      const conn = this.conn ?? (await this.open());
      try {
        // Through knex, for its statement deadline: a session that no longer answers is ended.
        const { rows } = await this.db.raw('select pg_try_advisory_lock(hashtextextended(?, 0)) as ok', [lock]).connection(conn);
        // Not the session any more: it failed while the statement ran, and the lock went with it.
        if (!rows[0].ok || this.conn !== conn) return null;
        const lost = new AbortController();
        this.held.set(lock, lost);
        return lost.signal;
      } finally {
        await this.closeIfIdle();
      }
    });
  }

  /** Gives the lease `lock` up (shutdown); the connection goes back to the pool with the last one. */
  give(lock: string): Promise<void> {
    return this.inTurn(async () => {
      const conn = this.conn;
      if (!this.held.delete(lock) || !conn) return;
      // A lock left on a pooled connection would keep the work from every other process for as
      // long as the pool keeps the connection: the session is closed when the unlock does not go through.
      await this.db.raw('select pg_advisory_unlock(hashtextextended(?, 0)) as ok', [lock]).connection(conn)
        .catch(() => conn.end().catch(() => undefined));
      await this.closeIfIdle();
    });
  }

  /**
   * While leases are held, every LEASE_RETRY_MS: a statement on the session, within the pool's
   * deadline. A session whose server stopped answering (a host cut off) is ended by the deadline
   * and its holders stop, instead of working on for as long as the operating system keeps the
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
    try {
      await this.db.raw(`set idle_session_timeout = ${LEASE_IDLE_TIMEOUT_MS}`).connection(conn);
      this.idleBounded.add(conn);
    } catch {
      // PostgreSQL before 14 has no such setting: a cut-off holder keeps its leases until TCP keepalive ends its session.
    }
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
    // Back in the pool the connection may sit idle for long: without its timeout, or closed (and
    // so dropped by the pool) when the reset does not go through.
    if (this.idleBounded.delete(conn)) {
      await this.db.raw('reset idle_session_timeout').connection(conn).catch(() => conn.end().catch(() => undefined));
    }
    await this.db.client.releaseConnection(conn);
  }

  /**
   * The session failed: PostgreSQL released its locks as it ended, so everything held on it stops
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

/** Work run under a lease; its log lines are the operator's (docs/OPERATIONS.md quotes them). */
export interface LeasedWork {
  /** The advisory lock: `motor.follower:<name>`, `motor.projector:<name>`. */
  lock: string;
  /** Fields of each of its log lines (`{ follower }`, `{ projection }`). */
  log: Record<string, string>;
  /** Its log lines: the lease taken, the lease lost, the database out of reach when trying. */
  says: { took: string; lost: string; unreachable: string };
  /** How often a process without the lease tries to take it. Default LEASE_RETRY_MS. */
  retryMs?: number;
  /** Told true when this process takes the lease, false when it stands by (at start too): the leader gauges. */
  leading?(held: boolean): void;
  /** Does the work until `signal` aborts: the lease lost, or the caller's signal. */
  run(signal: AbortSignal): Promise<void>;
  /**
   * Called when the work stopped, before the lease is given up, so that the next holder starts
   * from the checkpoint of all this one did. Its failure is logged and ends nothing.
   */
  stopped?(): Promise<void>;
}

/**
 * `work` in one process at a time: stands by until it holds the lease, runs the work while it
 * does, and stands by again when it loses it. Runs until `signal` aborts, then gives the lease up
 * (the next holder need not wait for this process's session to end).
 */
export async function runAlone(db: Knex, logger: LeaseLogger, work: LeasedWork, signal: AbortSignal): Promise<void> {
  const session = sessionOf(db);
  const retryMs = work.retryMs ?? LEASE_RETRY_MS;
  work.leading?.(false);
  let failing = false;
  while (!signal.aborted) {
    let lease: AbortSignal | null = null;
    try {
      lease = await session.take(work.lock);
      failing = false;
    } catch (err) {
      // Once per outage: the database being down is logged by everything else that uses it.
      if (!failing) logger.warn({ err, ...work.log }, work.says.unreachable);
      failing = true;
    }
    if (!lease) {
      await sleep(retryMs, signal);
      continue;
    }
    logger.info(work.log, work.says.took);
    work.leading?.(true);
    await runWhileHeld(work, lease, signal);
    await work.stopped?.().catch((err) => logger.warn({ err, ...work.log }, 'leased work could not finish its stop (its checkpoint); the next holder starts from the last one written'));
    work.leading?.(false);
    if (signal.aborted) {
      await session.give(work.lock).catch(() => undefined);
      return;
    }
    logger.warn({ err: lease.reason, ...work.log }, work.says.lost);
    // Longer than the others' retry interval: a process whose session failed may well see it fail
    // again, and one standing by takes over first.
    await sleep(2 * retryMs, signal);
  }
}

/** Runs until the lease is lost or `signal` aborts. */
async function runWhileHeld(work: LeasedWork, lease: AbortSignal, signal: AbortSignal): Promise<void> {
  const run = new AbortController();
  const stop = () => run.abort();
  signal.addEventListener('abort', stop, { once: true });
  lease.addEventListener('abort', stop, { once: true });
  if (signal.aborted || lease.aborted) stop();
  try {
    await work.run(run.signal);
  } finally {
    signal.removeEventListener('abort', stop);
    lease.removeEventListener('abort', stop);
  }
}

/** The session holding a lease, as pg_stat_activity shows it. */
export interface LeaseHolder {
  /** The holding backend's process id (`pg_terminate_backend(pid)` moves the lease). */
  pid: number;
  /** Which Motor process: `motor-<roles>@<host>:<pid>` (infra/db.ts processApplicationName). */
  applicationName: string | null;
  /** The holder's address as the server sees it; null over a Unix socket, or where the status's user may not see it. */
  clientAddress: string | null;
  /**
   * When the holding session connected. PostgreSQL does not record when a lock was taken: the
   * lease was taken then or later (the holder's `took a ... lease` log line says when). Null, as
   * the address and the last statement, to a user without the right to see another user's sessions.
   */
  sessionStartedAt: string | null;
  /**
   * The last statement the holding session sent: the holder checks its session every 2 s, so one
   * older than a few seconds says the server no longer hears from it (its host cut off) though
   * it keeps the lock.
   */
  lastStatementAt: string | null;
}

/**
 * Who holds each lease `locks` names (null: nobody), read from pg_locks and pg_stat_activity: an
 * advisory lock shows there as the two halves (classid, objid) of its 64-bit key, which is
 * computed here as the holders compute it.
 */
export async function leaseHolders(db: Knex, locks: readonly string[]): Promise<Map<string, LeaseHolder | null>> {
  const { rows } = await db.raw(
    `select k.lock, l.pid, a.application_name, host(a.client_addr) as client_addr, a.backend_start, a.query_start
       from unnest(?::text[]) as k(lock)
       left join pg_locks l on l.locktype = 'advisory' and l.granted and l.objsubid = 1
            and l.database = (select oid from pg_database where datname = current_database())
            and ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(k.lock, 0)
       left join pg_stat_activity a on a.pid = l.pid`,
    [[...locks]],
  );
  const held = new Map<string, LeaseHolder | null>(locks.map((lock) => [lock, null]));
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  for (const r of rows as Array<{ lock: string; pid: number | null; application_name: string | null; client_addr: string | null; backend_start: Date | null; query_start: Date | null }>) {
    if (r.pid === null) continue;
    held.set(r.lock, {
      pid: r.pid, applicationName: r.application_name, clientAddress: r.client_addr,
      sessionStartedAt: iso(r.backend_start), lastStatementAt: iso(r.query_start),
    });
  }
  return held;
}
