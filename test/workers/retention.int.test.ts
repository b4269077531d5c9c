import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { createDb } from '../../infra/db';
import { createLogger } from '../../infra/logger';
import { messagesProjection } from '../../projections/messages/projection';
import { ProjectionRunner } from '../../projections/runner';
import { RetentionSweeper, retentionCutoff, retentionFirstSweepDelayMs, type SweepReport } from '../../workers/retention';
import { accepted, delivered, startAnalyticsMotor, type AnalyticsMotor } from '../analytics/support';

/**
 * When the retention sweeper runs, against real PostgreSQL (what it deletes is
 * test/analytics/retention.int.test.ts): the first sweep comes a short random delay after start,
 * not a whole interval later (a worker restarted more often than the interval never swept); an
 * abort during that delay ends run() at once; two processes sweeping at once (workers restarted
 * together) delete every expired row once, without an error, one of them sweeping while the other
 * finds the sweep taken.
 */
const NOW = new Date('2026-06-15T12:00:00Z');
const DAY = 86_400_000;
const HOUR = 3_600_000;

describe('retention sweeper: first sweep and concurrent sweeps (int)', function () {
  this.timeout(120_000);
  let motor: AnalyticsMotor;
  let free: BootstrapResult;
  let messages: ProjectionRunner;
  const clock = { now: () => new Date(NOW) };
  const silent = createLogger('silent');

  // `n` sends of the free plan's account (7 days), 40 days old and an hour apart: all past retention.
  const seedExpired = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const id = randomUUID();
      const at = new Date(NOW.getTime() - 40 * DAY - i * HOUR).toISOString();
      const to = [`a${i}@gmail.com`, `b${i}@corp.test`];
      await motor.append(id, [
        accepted(id, free.motorBlockId, to, at, free.accountId),
        delivered(id, to[0], at, 'gmail-smtp-in.l.google.com'),
        delivered(id, to[1], at, 'mx.corp.test'),
      ]);
    }
    await motor.project();
    await messages.catchUp();
  };
  // The free account's rows past its cutoff, per table the sweeper reports.
  const expired = async (): Promise<Record<string, number>> => {
    const cutoff = retentionCutoff(7, NOW);
    const count = async (sql: string, bindings: Knex.RawBinding[]) => (await motor.rt.db.raw(sql, bindings)).rows[0].n as number;
    return {
      'rm_analytics.recipient_stats': await count('select count(*)::int as n from rm_analytics.recipient_stats where account_id = ? and accepted_at < ?', [free.accountId, cutoff]),
      'rm_analytics.block_hourly': await count('select count(*)::int as n from rm_analytics.block_hourly where motor_block_id = ? and hour < ?', [free.motorBlockId, cutoff]),
      'rm_analytics.domain_hourly': await count('select count(*)::int as n from rm_analytics.domain_hourly where motor_block_id = ? and hour < ?', [free.motorBlockId, cutoff]),
      'rm_analytics.domain_daily': await count('select count(*)::int as n from rm_analytics.domain_daily where motor_block_id = ? and day < ?', [free.motorBlockId, cutoff]),
      'rm_messages.messages': await count('select count(*)::int as n from rm_messages.messages where account_id = ? and queued_at < ?', [free.accountId, cutoff]),
    };
  };
  const expiredMessages = async () => (await expired())['rm_messages.messages'];
  const waitFor = async (cond: () => Promise<boolean>, ms: number) => {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      if (await cond()) return true;
      await new Promise((r) => setTimeout(r, 25));
    }
    return cond();
  };

  before(async () => {
    motor = await startAnalyticsMotor({ clock });
    free = await motor.bootstrap('free');
    messages = new ProjectionRunner(motor.rt.db, motor.rt.store, messagesProjection);
    await messages.init();
  });
  after(async () => { await motor?.close(); });

  it('by default the first sweep comes within 60 s of start (or the interval, when shorter), spread', () => {
    expect(retentionFirstSweepDelayMs(3_600_000, () => 0)).to.equal(0);
    expect(retentionFirstSweepDelayMs(3_600_000, () => 0.999999)).to.be.within(59_000, 59_999);
    expect(retentionFirstSweepDelayMs(10_000, () => 0.999999)).to.be.within(9_000, 9_999);
    const drawn = Array.from({ length: 50 }, () => retentionFirstSweepDelayMs(3_600_000));
    expect(drawn.every((d) => d >= 0 && d < 60_000)).to.equal(true);
    expect(new Set(drawn).size, 'spread, not one fixed delay').to.be.above(1);
  });

  it('run(): the first sweep comes after the initial delay, not after the interval', async () => {
    await seedExpired(3);
    expect(await expiredMessages()).to.equal(3);
    const sweeper = new RetentionSweeper(motor.rt.db, motor.config, silent, { intervalMs: 3_600_000, batchSize: 100, pauseMs: 0, clock, firstSweepAfterMs: 1000 });
    const abort = new AbortController();
    const started = Date.now();
    const running = sweeper.run(abort.signal);
    try {
      await new Promise((r) => setTimeout(r, 100));
      expect(await expiredMessages(), 'not swept before the delay').to.equal(3);
      expect(await waitFor(async () => (await expiredMessages()) === 0, 15_000), 'swept soon after the delay').to.equal(true);
      expect(Date.now() - started).to.be.at.least(1000);
      expect(Object.values(await expired()).every((n) => n === 0), JSON.stringify(await expired())).to.equal(true);
    } finally {
      abort.abort();
      await running;
    }
  });

  it('run(): an abort during the initial delay returns at once, without a sweep', async () => {
    await seedExpired(2);
    const left = await expiredMessages();
    const sweeper = new RetentionSweeper(motor.rt.db, motor.config, silent, { intervalMs: 3_600_000, batchSize: 100, pauseMs: 0, clock, firstSweepAfterMs: 30_000 });
    const abort = new AbortController();
    const running = sweeper.run(abort.signal);
    await new Promise((r) => setTimeout(r, 100));
    const aborted = Date.now();
    abort.abort();
    await running;
    expect(Date.now() - aborted, '30 s delay left').to.be.below(500);
    expect(await expiredMessages()).to.equal(left);
    // A sweeper whose signal is already aborted does not start.
    const again = new AbortController();
    again.abort();
    await new RetentionSweeper(motor.rt.db, motor.config, silent, { intervalMs: 3_600_000, batchSize: 100, clock, firstSweepAfterMs: 0 }).run(again.signal);
    expect(await expiredMessages()).to.equal(left);
  });

  it('two processes sweeping at once delete every expired row once, neither fails; one sweeps, the other finds it taken', async () => {
    await seedExpired(30);
    const before = await expired();
    expect(before['rm_messages.messages']).to.be.at.least(30);
    // A second pool, as a second worker process has: its own connections to the same database.
    const other = createDb((motor.rt.db.client.config.connection as { connectionString: string }).connectionString);
    try {
      const opts = { intervalMs: 3_600_000, batchSize: 3, pauseMs: 0 };
      const a = new RetentionSweeper(motor.rt.db, motor.config, silent, opts);
      const b = new RetentionSweeper(other, motor.config, silent, opts);
      await other.raw('select 1'); // connected already, as a running worker is
      const results = await Promise.allSettled([a.sweepOnce(NOW), b.sweepOnce(NOW)]);
      const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => String(r.reason));
      expect(failures).to.deep.equal([]);
      const reports = results.map((r) => (r as PromiseFulfilledResult<SweepReport>).value);
      for (const table of Object.keys(before)) {
        const total = reports.reduce((sum, r) => sum + (r.deleted[table] ?? 0), 0);
        expect(total, `${table}: deleted once each`).to.equal(before[table]);
      }
      expect(Object.values(await expired()).every((n) => n === 0)).to.equal(true);
      // Only one sweeps at a time: the other did no work of its own.
      expect(reports.map((r) => r.skipped ?? false).sort()).to.deep.equal([false, true]);
      // The lock goes with the sweep: later sweeps of either process run.
      expect((await b.sweepOnce(NOW)).skipped).to.equal(undefined);
      expect((await a.sweepOnce(NOW)).skipped).to.equal(undefined);
    } finally {
      await other.destroy();
    }
  });

  // Who holds the sweep lock in this database (pg_locks is the cluster's: other test databases sweep too).
  const lockHolders = async (): Promise<number[]> => (await motor.rt.db.raw(
    `select pid from pg_locks where locktype = 'advisory' and granted and objsubid = 1
       and database = (select oid from pg_database where datname = current_database())
       and ((classid::bigint << 32) | objid::bigint) = hashtextextended('motor.retention-sweep', 0)`)).rows.map((r: { pid: number }) => r.pid);
  // A second process's pool: a lock left on a connection of the first would let the first sweep again
  // (session advisory locks are re-entrant), never the second.
  const sweepsAfter = async (first: RetentionSweeper) => {
    const other = createDb((motor.rt.db.client.config.connection as { connectionString: string }).connectionString);
    try {
      expect(await lockHolders(), 'no session holds the lock').to.deep.equal([]);
      const report = await new RetentionSweeper(other, motor.config, silent, { intervalMs: 3_600_000, batchSize: 100, pauseMs: 0 }).sweepOnce(NOW);
      expect(report.skipped, 'another process sweeps after it').to.equal(undefined);
      expect((await first.sweepOnce(NOW)).skipped, 'and so does the same one').to.equal(undefined);
    } finally {
      await other.destroy();
    }
  };

  it('a sweep that fails mid-way releases the lock: the error comes out, and later sweeps of every process run', async () => {
    await seedExpired(10);
    const states = async () => (await expired())['rm_analytics.recipient_stats'];
    const before = await states();
    const sweeper = new RetentionSweeper(motor.rt.db, motor.config, silent, { intervalMs: 3_600_000, batchSize: 3, pauseMs: 0 });
    // Fails between two batches, after some rows went (the signal is read before each batch).
    let reads = 0;
    const failing = { get aborted() { if (++reads > 4) throw new Error('failed mid-sweep'); return false; } } as AbortSignal;
    const result = await sweeper.sweepOnce(NOW, failing).then(() => null, (err: Error) => err.message);
    expect(result).to.equal('failed mid-sweep');
    // Four batches of the first table, then the error.
    expect(before - await states(), 'stopped mid-way').to.equal(12);
    await sweepsAfter(sweeper);
    expect(Object.values(await expired()).every((n) => n === 0)).to.equal(true);
  });

  it('a sweep whose connection is killed mid-way (pg_terminate_backend) fails, and the lock goes with the session', async () => {
    await seedExpired(30);
    const sweeper = new RetentionSweeper(motor.rt.db, motor.config, silent, { intervalMs: 3_600_000, batchSize: 3, pauseMs: 200 });
    const sweeping = sweeper.sweepOnce(NOW).then(() => null, (err: Error) => err);
    let holders: number[] = [];
    expect(await waitFor(async () => (holders = await lockHolders()).length > 0, 10_000), 'the sweep holds the lock').to.equal(true);
    await motor.rt.db.raw('select pg_terminate_backend(?)', [holders[0]]);
    expect(await sweeping, 'the sweep failed').to.be.instanceOf(Error);
    expect(await expiredMessages(), 'stopped mid-way').to.be.above(0);
    await sweepsAfter(sweeper);
    expect(Object.values(await expired()).every((n) => n === 0)).to.equal(true);
  });
});
