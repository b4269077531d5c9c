import type { Knex } from 'knex';
import type { Config } from '../infra/config';
import { LONG_QUERY_TIMEOUT_MS, withQueryTimeout } from '../infra/db';
import type { Logger } from '../infra/logger';
import { sleep } from '../infra/sleep';
import { RETENTION_GRACE_MS } from '../read-api/http/retention';

/**
 * The retention sweeper (docs/ANALYTICS.md "Retention"): deletes read-model rows older than the
 * retention window of the account's plan, in the worker role, every RETENTION_SWEEP_INTERVAL_SECONDS.
 *
 * - When: the first sweep a random 0–60 s after start (retentionFirstSweepDelayMs; never later than
 *   the interval), then an interval after each sweep ends. A first sweep one whole interval after
 *   start never came in a worker restarted more often than that (deploys, crashes), and rows outlived
 *   their retention; the spread keeps workers restarted together from all sweeping at once.
 * - One sweep at a time across processes: a sweep holds a session advisory lock
 *   (`motor.retention-sweep`) on the connection it runs its statements on, taken with try-lock; a
 *   sweeper that finds it taken skips that sweep (the holder deletes the same rows) and tries again
 *   an interval later. Two unlocked sweeps did not delete a row twice nor fail (tried), but they
 *   contend for the same rows, a sweep leaves a table when a batch comes back short, as it does
 *   when the other took the rows (so neither sweep alone was complete), and the database work
 *   doubles. So a sweep keeps one pooled connection from its start to its end, the pauses between
 *   batches included. PostgreSQL releases the lock when the session ends, so a worker killed
 *   mid-sweep does not block the next one; a host lost without closing its connections keeps the
 *   lock until PostgreSQL finds the connection dead (TCP keepalive), and the other workers skip
 *   their sweeps until then.
 * - Cutoff per account: the start of the UTC day containing `now − retentionDays − 5 min` (the API's
 *   clock-skew grace), so nothing a route may still be asked for is deleted; a row goes when its
 *   time (hour/day of acceptance, `queued_at`, `accepted_at`) is before the cutoff.
 * - Tables: rm_analytics (recipient_stats, block_hourly, domain_hourly, domain_daily, code_hourly),
 *   rm_messages (messages with their message_recipients and message_events) and
 *   rm_commsuppressions.message_owners and rm_blocksuppressions.message_blocks (the suppression
 *   lists themselves are kept), rm_commtracking.hits
 *   (campaign opens and clicks, by `occurred_at`), rm_webhooks (deliveries by `queued_at`, attempts
 *   by `attempted_at`, found through the account's endpoints; the endpoints are kept). Rollup rows are
 *   found through the block's account (rm_directory); rows of blocks no longer in the directory are
 *   left to the block-deletion path. `domain_first_send` (one row per domain, the warm-up start) is
 *   kept.
 * - Orphans: states / messages that only late events created after their send was pruned (no
 *   account, never accepted) are deleted once the event that created them is a day old; they never count.
 * - Bounded: every statement deletes at most `batchSize` rows (rows chosen first through an index,
 *   then deleted by ctid/id), so no transaction is long. A running transaction that holds an xid
 *   holds back every event-store reader (docs/ARCHITECTURE.md: the xmin horizon), so the sweeper
 *   never wraps batches in one transaction and yields between them.
 * - The event log is not touched (it is the source of truth). A replay rebuilds rows beyond
 *   retention too; every route clamps to the retention window, so answers are the same before the
 *   next sweep, and the sweep after it deletes exactly the same rows (tested).
 */

const DAY_MS = 86_400_000;
const ORPHAN_AGE_MS = DAY_MS;

/** Rows older than this go, for a plan of `retentionDays`. */
export function retentionCutoff(retentionDays: number, now: Date): Date {
  const t = now.getTime() - retentionDays * DAY_MS - RETENTION_GRACE_MS;
  return new Date(Math.floor(t / DAY_MS) * DAY_MS);
}

export type RetentionConfig = Pick<Config, 'plans' | 'defaultPlan'>;

export interface SweepReport {
  /** Rows deleted per table (schema.table). */
  deleted: Record<string, number>;
  durationMs: number;
  /** Another sweep (another process) held the sweep lock: this one deleted nothing. */
  skipped?: true;
}

export interface RetentionSweeperOptions {
  /** Between the end of one sweep and the start of the next. */
  intervalMs: number;
  /** Rows per delete statement. */
  batchSize: number;
  /** Pause between two batches of a table (10 ms when absent). */
  pauseMs?: number;
  /** Delay from run() to the first sweep; retentionFirstSweepDelayMs(intervalMs) when absent. */
  firstSweepAfterMs?: number;
  clock?: { now(): Date };
}

/** The first sweep's delay: 0 to 60 s, or to the interval when that is shorter (spread, so workers started together do not sweep together). */
export function retentionFirstSweepDelayMs(intervalMs: number, random: () => number = Math.random): number {
  return Math.floor(random() * Math.min(60_000, intervalMs));
}

/** Held by the process sweeping (a session advisory lock; infra/db.ts names its locks the same way). */
const SWEEP_LOCK = 'motor.retention-sweep';

/** The pg client of a pooled connection, as far as the lock needs it. */
interface PgConnection {
  end(): Promise<void>;
}

interface Target {
  table: string;
  /** One bounded delete; returns the rows deleted (of the table named). */
  statement: (n: number) => { sql: string; bindings: Knex.RawBinding[] };
}

export class RetentionSweeper {
  /**
   * `db` for the deletes, with the long deadline (infra/db.ts LONG_QUERY_TIMEOUT_MS): a delete of
   * `batchSize` rows (up to a million, RETENTION_SWEEP_BATCH) on a big table may take minutes, and
   * cut, it would be cut again at every sweep while the tables grow. The sweep lock keeps `db`'s.
   */
  private readonly deletes: Knex;

  constructor(
    private readonly db: Knex,
    private readonly config: RetentionConfig,
    private readonly logger: Logger,
    private readonly opts: RetentionSweeperOptions = { intervalMs: 3_600_000, batchSize: 5000 },
  ) {
    this.deletes = withQueryTimeout(db, LONG_QUERY_TIMEOUT_MS);
  }

  private targets(now: Date): Target[] {
    const plans = Object.values(this.config.plans);
    const names = plans.map((p) => p.name);
    const cutoffs = plans.map((p) => retentionCutoff(p.retentionDays, now));
    const fallback = retentionCutoff(this.config.defaultPlan.retentionDays, now);
    // Per account: its plan's cutoff (an unknown plan is the fallback: the default plan's retention).
    const acct = `acct as (
      select a.id as account_id, coalesce(p.cutoff, ?::timestamptz) as cutoff
      from rm_directory.accounts a left join unnest(?::text[], ?::timestamptz[]) as p(plan, cutoff) on p.plan = a.plan)`;
    const acctB = [fallback, names, cutoffs];
    const blk = `blk as (select b.id as block_id, c.cutoff from rm_directory.motor_blocks b join acct c on c.account_id = b.account_id)`;
    const orphanBefore = new Date(now.getTime() - ORPHAN_AGE_MS);

    const rollup = (table: string, column: 'hour' | 'day'): Target => ({
      table: `rm_analytics.${table}`,
      statement: (n) => ({
        sql: `with ${acct}, ${blk}
          delete from rm_analytics.${table} where ctid = any(array(
            select x.ctid from blk cross join lateral (
              select t.ctid from rm_analytics.${table} t where t.motor_block_id = blk.block_id and t.${column} < blk.cutoff limit ?) x
            limit ?))`,
        bindings: [...acctB, n, n],
      }),
    });
    // Rows of a table keyed by account, with the time they count from.
    const accountRows = (table: string, column: string): Target => ({
      table,
      statement: (n) => ({
        sql: `with ${acct}
          delete from ${table} where ctid = any(array(
            select x.ctid from acct cross join lateral (
              select t.ctid from ${table} t where t.account_id = acct.account_id and t.${column} < acct.cutoff limit ?) x
            limit ?))`,
        bindings: [...acctB, n, n],
      }),
    });
    // Rows of an rm_webhooks table keyed by endpoint: its (webhook_id, time) index is the range scan.
    const endpointRows = (table: 'deliveries' | 'attempts', column: 'queued_at' | 'attempted_at'): Target => ({
      table: `rm_webhooks.${table}`,
      statement: (n) => ({
        sql: `with ${acct}
          delete from rm_webhooks.${table} where ctid = any(array(
            select x.ctid from acct join rm_webhooks.endpoints w on w.account_id = acct.account_id cross join lateral (
              select t.ctid from rm_webhooks.${table} t where t.webhook_id = w.id and t.${column} < acct.cutoff limit ?) x
            limit ?))`,
        bindings: [...acctB, n, n],
      }),
    });
    return [
      // States first: a late outcome then finds no state and adds nothing to a pruned hour.
      accountRows('rm_analytics.recipient_stats', 'accepted_at'),
      {
        table: 'rm_analytics.recipient_stats (orphans)',
        statement: (n) => ({
          sql: `delete from rm_analytics.recipient_stats where ctid = any(array(
            select ctid from rm_analytics.recipient_stats where account_id is null and accepted_at is null and outcome_at < ? limit ?))`,
          bindings: [orphanBefore, n],
        }),
      },
      rollup('block_hourly', 'hour'),
      rollup('domain_hourly', 'hour'),
      rollup('domain_daily', 'day'),
      rollup('code_hourly', 'hour'),
      {
        table: 'rm_messages.messages',
        statement: (n) => ({
          sql: `with ${acct},
            m as materialized (
              select x.id from acct cross join lateral (
                select t.id from rm_messages.messages t where t.account_id = acct.account_id and t.queued_at < acct.cutoff limit ?) x
              limit ?),
            r as (delete from rm_messages.message_recipients where message_id in (select id from m)),
            e as (delete from rm_messages.message_events where message_id in (select id from m))
            delete from rm_messages.messages where id in (select id from m)`,
          bindings: [...acctB, n, n],
        }),
      },
      // Which account a message is of, for the suppression list: a complaint older than retention suppresses nothing.
      accountRows('rm_commsuppressions.message_owners', 'accepted_at'),
      // Which block a message is of, for the block's suppression list (docs/DELIVERY.md "Suppressions"), likewise.
      accountRows('rm_blocksuppressions.message_blocks', 'accepted_at'),
      // Opens and clicks of campaign mail, by when they happened (a click can come after its message was pruned).
      accountRows('rm_commtracking.hits', 'occurred_at'),
      // Webhook deliveries by when they were queued, attempts by when they were made (the windows the
      // deliveries and stats routes read), through the account's endpoints (deleted ones too).
      endpointRows('deliveries', 'queued_at'),
      endpointRows('attempts', 'attempted_at'),
      {
        table: 'rm_messages.messages (orphans)',
        statement: (n) => ({
          sql: `with m as materialized (
              select id from rm_messages.messages where account_id is null and not accepted and queued_at < ? limit ?),
            r as (delete from rm_messages.message_recipients where message_id in (select id from m)),
            e as (delete from rm_messages.message_events where message_id in (select id from m))
            delete from rm_messages.messages where id in (select id from m)`,
          bindings: [orphanBefore, n],
        }),
      },
    ];
  }

  /**
   * One full sweep: every table, batch after batch, until nothing is left past retention; skipped
   * (deleting nothing) while another sweeper holds the sweep lock.
   */
  async sweepOnce(now = new Date(), signal?: AbortSignal): Promise<SweepReport> {
    const started = performance.now();
    // A session lock lives on its connection, so the sweep keeps this one throughout, pauses
    // included (before the lock it borrowed one per statement), and runs its statements on it:
    // sending them through the pool would not give this connection back, only take a second one.
    const conn = (await this.db.client.acquireConnection()) as PgConnection;
    try {
      // Through knex, for its deadline: a pooled connection whose server stopped answering is found here.
      const { rows } = await this.db.raw('select pg_try_advisory_lock(hashtextextended(?, 0)) as ok', [SWEEP_LOCK]).connection(conn);
      if (!rows[0].ok) {
        this.logger.debug('retention sweep skipped: another process is sweeping');
        return { deleted: {}, durationMs: performance.now() - started, skipped: true };
      }
      try {
        return await this.sweepLocked(conn, now, started, signal);
      } finally {
        // A lock left on a pooled connection would keep every later sweep out: close the session
        // (PostgreSQL then releases its locks) when the unlock does not go through.
        await this.db.raw('select pg_advisory_unlock(hashtextextended(?, 0)) as ok', [SWEEP_LOCK]).connection(conn).catch(() => conn.end().catch(() => undefined));
      }
    } finally {
      await this.db.client.releaseConnection(conn);
    }
  }

  private async sweepLocked(conn: PgConnection, now: Date, started: number, signal?: AbortSignal): Promise<SweepReport> {
    const raw = (sql: string, bindings: readonly Knex.RawBinding[]) => this.deletes.raw(sql, bindings).connection(conn);
    const deleted: Record<string, number> = {};
    const present = await this.presentSchemas(raw);
    for (const target of this.targets(now)) {
      const schema = target.table.slice(0, target.table.indexOf('.'));
      if (!present.has(schema)) continue;
      deleted[target.table] = 0;
      for (;;) {
        if (signal?.aborted) return { deleted, durationMs: performance.now() - started };
        const { sql, bindings } = target.statement(this.opts.batchSize);
        const r = await raw(sql, bindings);
        const n = (r as { rowCount: number }).rowCount ?? 0;
        deleted[target.table] += n;
        if (n < this.opts.batchSize) break;
        // Let the projectors and the API have the database between batches.
        await new Promise((resolve) => setTimeout(resolve, this.opts.pauseMs ?? 10));
      }
    }
    const total = Object.values(deleted).reduce((a, b) => a + b, 0);
    const durationMs = performance.now() - started;
    if (total > 0) this.logger.info({ deleted, durationMs: Math.round(durationMs) }, 'retention sweep deleted read-model rows past retention');
    return { deleted, durationMs };
  }

  private async presentSchemas(raw: (sql: string, bindings: readonly Knex.RawBinding[]) => Knex.Raw): Promise<Set<string>> {
    const r = await raw(`select nspname from pg_namespace where nspname = any(?::text[])`, [['rm_directory', 'rm_analytics', 'rm_messages', 'rm_commsuppressions', 'rm_blocksuppressions', 'rm_commtracking', 'rm_webhooks']]);
    const found = new Set((r.rows as Array<{ nspname: string }>).map((x) => x.nspname));
    // Without the directory there is no account to sweep for.
    return found.has('rm_directory') ? found : new Set();
  }

  /** Sweeps a short random delay after start (firstSweepAfterMs), then every interval, until the signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    let wait = this.opts.firstSweepAfterMs ?? retentionFirstSweepDelayMs(this.opts.intervalMs);
    while (!signal.aborted) {
      await sleep(wait, signal);
      if (signal.aborted) return;
      wait = this.opts.intervalMs;
      try {
        await this.sweepOnce(this.opts.clock?.now() ?? new Date(), signal);
      } catch (err) {
        this.logger.error({ err }, 'retention sweep failed; retrying at the next interval');
      }
    }
  }
}
