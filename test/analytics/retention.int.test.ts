import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { analyticsProjection } from '../../projections/analytics/projection';
import { messagesProjection } from '../../projections/messages/projection';
import { commSuppressionsProjection } from '../../projections/commSuppressions/projection';
import { ProjectionRunner, rebuild } from '../../projections/runner';
import { createLogger } from '../../infra/logger';
import { RetentionSweeper, retentionCutoff } from '../../workers/retention';
import { accepted, complained, delivered, startAnalyticsMotor, type AnalyticsMotor } from './support';

/**
 * The retention sweeper against real PostgreSQL: two accounts on plans with different retention
 * (free 7 days, starter 30 days), sends 2, 10 and 40 days old. After a sweep, rows beyond each
 * account's retention are gone and the rest stay; the API's answers do not change (routes never
 * read past retention); a rebuild from zero followed by a sweep leaves exactly the same rows.
 */
const NOW = new Date('2026-06-15T12:00:00Z');
const DAY = 86_400_000;
const ago = (days: number) => new Date(NOW.getTime() - days * DAY).toISOString();

describe('retention sweeper (int)', function () {
  this.timeout(120_000);
  let motor: AnalyticsMotor;
  let free: BootstrapResult;
  let starter: BootstrapResult;
  let messages: ProjectionRunner;
  let sweeper: RetentionSweeper;
  const ids: Record<string, Record<number, string>> = { free: {}, starter: {} };

  // Rows of the two blocks (motor.project() adds a sentinel send of another block every call).
  const snapshot = async () => {
    const blocks = [free.motorBlockId, starter.motorBlockId];
    const q = async (sql: string) => (await motor.rt.db.raw(sql, [blocks])).rows as unknown[];
    const mine = `message_id in (select id from rm_messages.messages where motor_block_id = any(?::uuid[]))`;
    return {
      blockHourly: await q(`select motor_block_id, hour, messages, total, delivered, complained from rm_analytics.block_hourly where motor_block_id = any(?::uuid[]) order by 1, 2`),
      domainHourly: await q(`select motor_block_id, hour, domain, provider, total, delivered from rm_analytics.domain_hourly where motor_block_id = any(?::uuid[]) order by 1, 2, 3, 4`),
      domainDaily: await q(`select motor_block_id, day, domain, provider, total, delivered from rm_analytics.domain_daily where motor_block_id = any(?::uuid[]) order by 1, 2, 3, 4`),
      stats: await q(`select message_id, recipient, outcome from rm_analytics.recipient_stats where motor_block_id = any(?::uuid[]) or (accepted_at is null and recipient <> 's@sentinel.test') order by 1, 2`),
      messages: await q(`select id, current_outcome, accepted from rm_messages.messages where motor_block_id = any(?::uuid[]) or (account_id is null and not accepted) order by 1`),
      recipients: await q(`select message_id, recipient, outcome from rm_messages.message_recipients where ${mine} order by 1, 2`),
      events: await q(`select count(*)::int as n from rm_messages.message_events where ${mine}`),
    };
  };
  const answers = async (b: BootstrapResult) => {
    const token = await motor.token(b, ['analytics.read', 'usage.read']);
    const out: Record<string, unknown> = {};
    for (const route of ['overview', 'daily-summary?days=7', 'deliverability', 'metrics?interval=day', 'reputation']) {
      const r = await motor.get(`/motor-blocks/${b.motorBlockId}/${route}`, token);
      expect(r.status, route).to.equal(200);
      out[route] = r.body;
    }
    // A message older than the retention is refused whether the read model still holds it (before
    // a sweep, after a rebuild) or not (its stream stays in the log): the same answer every time.
    const logsToken = await motor.token(b, ['logs.read']);
    for (const [days, id] of Object.entries(ids[b === free ? 'free' : 'starter'])) {
      for (const route of ['', '/events', '/recipients']) {
        const r = await motor.get(`/messages/${id}${route}`, logsToken);
        out[`${days}d message${route}`] = { status: r.status, code: r.body.code ?? null };
      }
    }
    return out;
  };
  const messageIds = async () => new Set(((await motor.rt.db.raw('select id from rm_messages.messages')).rows as Array<{ id: string }>).map((r) => r.id));
  const statIds = async () => new Set(((await motor.rt.db.raw('select message_id from rm_analytics.recipient_stats')).rows as Array<{ message_id: string }>).map((r) => r.message_id));
  const hours = async (b: BootstrapResult) =>
    ((await motor.rt.db.raw('select hour from rm_analytics.block_hourly where motor_block_id = ? order by hour', [b.motorBlockId])).rows as Array<{ hour: Date }>).map((r) => r.hour.toISOString());

  before(async () => {
    motor = await startAnalyticsMotor({ clock: { now: () => new Date(NOW) } });
    free = await motor.bootstrap('free');
    starter = await motor.bootstrap('starter');
    for (const [name, b] of [['free', free], ['starter', starter]] as const) {
      for (const days of [2, 10, 40]) {
        const id = randomUUID();
        ids[name][days] = id;
        const to = [`a${days}@gmail.com`, `b${days}@corp.test`];
        await motor.append(id, [
          accepted(id, b.motorBlockId, to, ago(days), b.accountId),
          delivered(id, to[0], ago(days - 0.001), 'gmail-smtp-in.l.google.com'),
          delivered(id, to[1], ago(days - 0.001), 'mx.corp.test'),
        ]);
      }
    }
    await motor.project();
    messages = new ProjectionRunner(motor.rt.db, motor.rt.store, messagesProjection);
    await messages.init();
    await messages.catchUp();
    const suppressions = new ProjectionRunner(motor.rt.db, motor.rt.store, commSuppressionsProjection);
    await suppressions.init();
    await suppressions.catchUp();
    sweeper = new RetentionSweeper(motor.rt.db, motor.config, createLogger('silent'), { intervalMs: 3_600_000, batchSize: 2, pauseMs: 0 });
  });
  after(async () => { await motor?.close(); });

  let afterSweep: Awaited<ReturnType<typeof snapshot>>;
  let answersAfterSweep: Record<string, unknown>[];

  it('cutoff: the start of the UTC day holding now − retention (minus the API grace)', () => {
    expect(retentionCutoff(7, NOW).toISOString()).to.equal('2026-06-08T00:00:00.000Z');
    expect(retentionCutoff(30, new Date('2026-06-15T00:02:00Z')).toISOString()).to.equal('2026-05-15T00:00:00.000Z');
    expect(retentionCutoff(30, new Date('2026-06-15T00:04:00Z')).toISOString()).to.equal('2026-05-15T00:00:00.000Z');
    expect(retentionCutoff(30, new Date('2026-06-15T00:06:00Z')).toISOString()).to.equal('2026-05-16T00:00:00.000Z');
  });

  it('message routes: 200 inside the plan\'s retention, 400 outside_retention_window past it', async () => {
    const [f, s] = [await answers(free), await answers(starter)];
    for (const route of ['', '/events', '/recipients']) {
      expect(f[`2d message${route}`]).to.deep.equal({ status: 200, code: null });
      for (const d of [10, 40]) expect(f[`${d}d message${route}`], `free ${d}d${route}`).to.deep.equal({ status: 400, code: 'outside_retention_window' });
      for (const d of [2, 10]) expect(s[`${d}d message${route}`]).to.deep.equal({ status: 200, code: null });
      expect(s[`40d message${route}`]).to.deep.equal({ status: 400, code: 'outside_retention_window' });
    }
  });

  it('deletes rows beyond each account\'s plan retention, in bounded batches, and keeps the rest; answers do not change', async () => {
    const answersBefore = [await answers(free), await answers(starter)];
    const report = await sweeper.sweepOnce(NOW);
    // free: 10 and 40 days gone; starter: 40 days gone. Two recipients per send.
    expect(report.deleted).to.deep.include({
      'rm_analytics.recipient_stats': 6, 'rm_analytics.block_hourly': 3, 'rm_analytics.domain_hourly': 6, 'rm_analytics.domain_daily': 6,
      'rm_messages.messages': 3, 'rm_commsuppressions.message_owners': 3,
    });
    const owners = new Set(((await motor.rt.db.raw('select message_id from rm_commsuppressions.message_owners')).rows as Array<{ message_id: string }>).map((r) => r.message_id));
    for (const d of [10, 40]) expect(owners.has(ids.free[d]), `free ${d}d owner`).to.equal(false);
    for (const d of [2]) expect(owners.has(ids.free[d]), `free ${d}d owner`).to.equal(true);
    expect(owners.has(ids.starter[10])).to.equal(true);
    const msgs = await messageIds();
    const stats = await statIds();
    for (const [name, kept, gone] of [['free', [2], [10, 40]], ['starter', [2, 10], [40]]] as const) {
      for (const d of kept) expect([msgs.has(ids[name][d]), stats.has(ids[name][d])], `${name} ${d}d kept`).to.deep.equal([true, true]);
      for (const d of gone) expect([msgs.has(ids[name][d]), stats.has(ids[name][d])], `${name} ${d}d gone`).to.deep.equal([false, false]);
    }
    expect(await hours(free)).to.deep.equal([new Date(Date.parse(ago(2)) - (Date.parse(ago(2)) % 3_600_000)).toISOString()]);
    expect(await hours(starter)).to.have.length(2);
    const orphaned = await motor.rt.db.raw(
      `select count(*)::int as n from rm_messages.message_recipients r where not exists (select 1 from rm_messages.messages m where m.id = r.message_id)`);
    expect(orphaned.rows[0].n).to.equal(0);
    const events = await motor.rt.db.raw(`select count(*)::int as n from rm_messages.message_events where message_id = ?`, [ids.free[40]]);
    expect(events.rows[0].n).to.equal(0);
    answersAfterSweep = [await answers(free), await answers(starter)];
    expect(answersAfterSweep).to.deep.equal(answersBefore);
    // The event log keeps everything.
    const log = await motor.rt.db.raw(`select count(*)::int as n from events where stream_id = ?`, [`message-${ids.free[40]}`]);
    expect(log.rows[0].n).to.equal(3);
    // A second sweep finds nothing.
    const again = await sweeper.sweepOnce(NOW);
    expect(Object.values(again.deleted).every((n) => n === 0)).to.equal(true);
    afterSweep = await snapshot();
  });

  it('a late outcome of a pruned send adds nothing to a pruned hour; its orphan state goes a day later', async () => {
    const id = ids.free[40];
    await motor.append(id, [complained(id, 'a40@gmail.com', ago(0.5))]);
    await motor.project();
    await messages.catchUp();
    expect(await hours(free)).to.have.length(1);
    const cutoff = retentionCutoff(7, NOW);
    const old = await motor.rt.db.raw('select count(*)::int as n from rm_analytics.block_hourly where motor_block_id = ? and hour < ?', [free.motorBlockId, cutoff]);
    expect(old.rows[0].n).to.equal(0);
    expect([await answers(free), await answers(starter)]).to.deep.equal(answersAfterSweep);
    const later = await sweeper.sweepOnce(new Date(NOW.getTime() + 2 * DAY));
    expect(later.deleted['rm_analytics.recipient_stats (orphans)']).to.equal(1);
    expect(later.deleted['rm_messages.messages (orphans)']).to.equal(1);
    expect((await statIds()).has(id)).to.equal(false);
    expect((await messageIds()).has(id)).to.equal(false);
  });

  it('a rebuild from zero followed by a sweep leaves the same rows and gives the same answers', async () => {
    await rebuild(motor.rt.db, motor.rt.store, analyticsProjection, { batchSize: 5 });
    await rebuild(motor.rt.db, motor.rt.store, messagesProjection, { batchSize: 5 });
    // Before the sweep the rebuilt model holds old rows again, but no route reads past retention.
    expect((await messageIds()).has(ids.free[40])).to.equal(true);
    expect([await answers(free), await answers(starter)]).to.deep.equal(answersAfterSweep);
    await sweeper.sweepOnce(NOW);
    await sweeper.sweepOnce(new Date(NOW.getTime() + 2 * DAY)); // the same two sweeps as the live model had
    const rebuilt = await snapshot();
    // The live model's late complaint arrived after its state was pruned, so counted nowhere; the
    // rebuilt model saw it before pruning, on a recipient of a pruned hour: pruned as well.
    expect(rebuilt).to.deep.equal(afterSweep);
    expect([await answers(free), await answers(starter)]).to.deep.equal(answersAfterSweep);
  });
});
