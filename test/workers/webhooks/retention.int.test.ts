import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { BootstrapResult } from '../../../commands/admin/bootstrap';
import { streamName, type EventData } from '../../../domain/eventStore';
import { createLogger } from '../../../infra/logger';
import { ProjectionRunner, rebuild } from '../../../projections/runner';
import { webhooksProjection } from '../../../projections/webhooks/projection';
import { RetentionSweeper } from '../../../workers/retention';
import { catchUpUntil } from '../../../scripts/runtime';
import { startAnalyticsMotor, type AnalyticsMotor } from '../../analytics/support';

/**
 * The retention sweeper on the webhooks read model (`rm_webhooks.deliveries` and `attempts`), as
 * test/analytics/retention.int.test.ts does it for analytics and messages: three accounts on plans of
 * 3 (the default plan here), 7 (free) and 30 (starter) days, each with an endpoint and deliveries
 * queued 2, 5, 10 and 40 days ago. The routes never show a delivery older than the window; a sweep
 * deletes the rows past each account's retention and keeps the rest without changing an answer; a
 * rebuild from zero brings the old rows back, the routes still leave them out, and the same sweep
 * leaves exactly the same rows as the live model.
 */
const NOW = new Date('2026-06-15T12:00:00Z');
const DAY = 86_400_000;
const AGES = [2, 5, 10, 40] as const;
const ago = (days: number) => new Date(NOW.getTime() - days * DAY).toISOString();

type Name = 'short' | 'free' | 'starter';

describe('retention sweeper: webhook deliveries and attempts (int)', function () {
  this.timeout(120_000);
  let motor: AnalyticsMotor;
  let runner: ProjectionRunner;
  let sweeper: RetentionSweeper;
  const accounts = {} as Record<Name, BootstrapResult>;
  const webhooks = {} as Record<Name, string>;
  const deliveries = {} as Record<Name, Record<number, string>>;

  const event = (type: string, data: Record<string, unknown>): EventData => ({ id: randomUUID(), type, version: 1, data });
  const attempted = (deliveryId: string, webhookId: string, motorBlockId: string, attempt: number, outcome: 'retrying' | 'delivered' | 'failed', at: string) =>
    event('WebhookDeliveryAttempted', {
      deliveryId, webhookId, motorBlockId, attempt, outcome, httpStatus: outcome === 'delivered' ? 200 : 503, error: outcome === 'delivered' ? null : 'http_503',
      responseBody: outcome === 'delivered' ? 'ok' : 'busy', durationMs: 100 * attempt, nextAttemptAt: outcome === 'retrying' ? at : null, attemptedAt: at,
    });

  const snapshot = async () => ({
    deliveries: (await motor.rt.db.raw(`select id, webhook_id, status, attempts, last_http_status, last_response_body, queued_at, completed_at from rm_webhooks.deliveries order by id`)).rows,
    attempts: (await motor.rt.db.raw(`select delivery_id, attempt, outcome, duration_ms, attempted_at from rm_webhooks.attempts order by 1, 2`)).rows,
  });
  const deliveryIds = async () => new Set(((await motor.rt.db.raw('select id from rm_webhooks.deliveries')).rows as Array<{ id: string }>).map((r) => r.id));
  const attemptIds = async () => new Set(((await motor.rt.db.raw('select delivery_id from rm_webhooks.attempts')).rows as Array<{ delivery_id: string }>).map((r) => r.delivery_id));

  /** What the deliveries and stats routes answer (status and body), per hours the plan allows and one it does not. */
  const answers = async (name: Name) => {
    const b = accounts[name];
    const token = await motor.token(b, ['webhooks.read']);
    const base = `/motor-blocks/${b.motorBlockId}/webhooks/${webhooks[name]}`;
    const out: Record<string, unknown> = {};
    for (const route of ['deliveries?limit=200', 'stats?hours=24', 'stats?hours=72', 'stats?hours=168']) {
      const r = await motor.get(`${base}/${route}`, token);
      out[route] = { status: r.status, body: r.status === 200 ? r.body.data : { code: r.body.code, retentionDays: r.body.retentionDays } };
    }
    return out;
  };
  const all = async () => ({ short: await answers('short'), free: await answers('free'), starter: await answers('starter') });
  const listed = async (name: Name) => {
    const r = (await answers(name))['deliveries?limit=200'] as { status: number; body: { deliveries: Array<{ id: string }> } };
    expect(r.status).to.equal(200);
    return r.body.deliveries.map((d) => d.id);
  };

  before(async () => {
    motor = await startAnalyticsMotor({ clock: { now: () => new Date(NOW) }, env: { PLAN_DEFAULT_RETENTION_DAYS: '3' } });
    accounts.short = await motor.bootstrap();
    accounts.free = await motor.bootstrap('free');
    accounts.starter = await motor.bootstrap('starter');
    for (const name of ['short', 'free', 'starter'] as const) {
      const { accountId, motorBlockId } = accounts[name];
      const webhookId = randomUUID();
      webhooks[name] = webhookId;
      deliveries[name] = {};
      await motor.rt.store.append(streamName('webhook', webhookId), [event('WebhookCreated', {
        webhookId, motorBlockId, accountId, url: 'https://hooks.example.test/x', events: ['message.delivered'], secretKeyId: randomUUID(), createdAt: ago(60),
      })]);
      for (const days of AGES) {
        const deliveryId = randomUUID();
        deliveries[name][days] = deliveryId;
        // free's 10-day delivery is left retrying: its late attempt comes after the sweep (below).
        const last = name === 'free' && days === 10 ? [] : [attempted(deliveryId, webhookId, motorBlockId, 2, 'delivered', ago(days - 0.01))];
        await motor.rt.store.append(streamName('webhookDelivery', deliveryId), [
          event('WebhookDeliveryQueued', { deliveryId, webhookId, motorBlockId, event: 'message.delivered', messageId: randomUUID(), payload: {}, queuedAt: ago(days) }),
          attempted(deliveryId, webhookId, motorBlockId, 1, 'retrying', ago(days - 0.001)),
          ...last,
        ]);
      }
    }
    runner = new ProjectionRunner(motor.rt.db, motor.rt.store, webhooksProjection, { batchSize: 5 });
    await runner.init();
    await catchUpUntil(runner, async () => (await deliveryIds()).size === 12 && (await attemptIds()).size === 12);
    sweeper = new RetentionSweeper(motor.rt.db, motor.config, createLogger('silent'), { intervalMs: 3_600_000, batchSize: 2, pauseMs: 0 });
  });
  after(async () => { await motor?.close(); });

  let afterSweep: Awaited<ReturnType<typeof snapshot>>;
  let answersAfterSweep: Awaited<ReturnType<typeof all>>;

  it('the deliveries route lists only deliveries queued inside the plan\'s retention window, although the read model holds older ones', async () => {
    expect(await deliveryIds()).to.have.property('size', 12);
    expect(await listed('short')).to.deep.equal([deliveries.short[2]]);
    expect(await listed('free')).to.deep.equal([deliveries.free[2], deliveries.free[5]]);
    expect(await listed('starter')).to.deep.equal([deliveries.starter[2], deliveries.starter[5], deliveries.starter[10]]);
  });

  it('the stats route: `hours` beyond the plan\'s retention is 400 outside_retention_window, as daily-summary `days` is', async () => {
    const a = await all();
    expect(a.short['stats?hours=168']).to.deep.equal({ status: 400, body: { code: 'outside_retention_window', retentionDays: 3 } });
    expect(a.short['stats?hours=72']).to.deep.include({ status: 200 });
    expect(a.free['stats?hours=168']).to.deep.include({ status: 200 });
    expect((a.free['stats?hours=168'] as { body: { delivered: number } }).body.delivered).to.equal(2);
  });

  it('deletes deliveries and attempts past each account\'s retention, in bounded batches, and keeps the rest; answers do not change', async () => {
    const answersBefore = await all();
    const report = await sweeper.sweepOnce(NOW);
    // short (3 days): 5, 10 and 40 gone; free (7): 10 and 40; starter (30): 40. Two attempts each, free's 10-day one has one.
    expect(report.deleted).to.deep.include({ 'rm_webhooks.deliveries': 6, 'rm_webhooks.attempts': 11 });
    const [ds, as] = [await deliveryIds(), await attemptIds()];
    for (const [name, kept, gone] of [['short', [2], [5, 10, 40]], ['free', [2, 5], [10, 40]], ['starter', [2, 5, 10], [40]]] as const) {
      for (const d of kept) expect([ds.has(deliveries[name][d]), as.has(deliveries[name][d])], `${name} ${d}d kept`).to.deep.equal([true, true]);
      for (const d of gone) expect([ds.has(deliveries[name][d]), as.has(deliveries[name][d])], `${name} ${d}d gone`).to.deep.equal([false, false]);
    }
    // Endpoints are configuration, not history: kept.
    expect((await motor.rt.db.raw('select count(*)::int as n from rm_webhooks.endpoints')).rows[0].n).to.equal(3);
    answersAfterSweep = await all();
    expect(answersAfterSweep).to.deep.equal(answersBefore);
    // The event log keeps everything.
    const log = await motor.rt.db.raw(`select count(*)::int as n from events where stream_id = ?`, [`webhookDelivery-${deliveries.short[40]}`]);
    expect(log.rows[0].n).to.equal(3);
    const again = await sweeper.sweepOnce(NOW);
    expect(again.deleted).to.deep.include({ 'rm_webhooks.deliveries': 0, 'rm_webhooks.attempts': 0 });
  });

  it('a late attempt of a pruned delivery does not bring the delivery back; its attempt row goes at the next sweep', async () => {
    const { motorBlockId } = accounts.free;
    const id = deliveries.free[10];
    await motor.rt.store.append(streamName('webhookDelivery', id), [attempted(id, webhooks.free, motorBlockId, 2, 'failed', ago(9.5))]);
    await catchUpUntil(runner, async () => (await attemptIds()).has(id));
    expect((await deliveryIds()).has(id)).to.equal(false);
    expect(await all()).to.deep.equal(answersAfterSweep);
    const later = await sweeper.sweepOnce(NOW);
    expect(later.deleted).to.deep.include({ 'rm_webhooks.deliveries': 0, 'rm_webhooks.attempts': 1 });
    expect((await attemptIds()).has(id)).to.equal(false);
    afterSweep = await snapshot();
  });

  it('a rebuild from zero followed by a sweep leaves the same rows and gives the same answers', async () => {
    await rebuild(motor.rt.db, motor.rt.store, webhooksProjection, { batchSize: 5 });
    // Before the sweep the rebuilt model holds the old deliveries again, but no route shows them.
    expect(await deliveryIds()).to.have.property('size', 12);
    expect(await all()).to.deep.equal(answersAfterSweep);
    await sweeper.sweepOnce(NOW);
    await sweeper.sweepOnce(NOW); // the same two sweeps as the live model had
    expect(await snapshot()).to.deep.equal(afterSweep);
    expect(await all()).to.deep.equal(answersAfterSweep);
  });
});
