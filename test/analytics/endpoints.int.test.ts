import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import type { EventData } from '../../domain/eventStore';
import { analyticsProjection } from '../../projections/analytics/projection';
import { rebuild } from '../../projections/runner';
import { postJson } from '../support/motor';
import { senderDomainOf } from '../read-api/publicApi';
import { accepted, bounced, complained, deferred, delivered, failed, started, startAnalyticsMotor, type AnalyticsMotor } from './support';

/**
 * Every figure of every analytics route against a hand-computed event history (docs/ANALYTICS.md):
 * "now" is fixed at 2026-03-15T10:30:00Z, the plan retention is 30 days. Recipients count in the UTC
 * hour their send was accepted. The history has a send accepted 30 s before midnight whose outcomes
 * arrive after it, a duplicate recipient, a late bounce after a delivery (async DSN), a deferral
 * appended after the bounce it precedes, a re-appended bounce (new event id), and a block of
 * another account's token. Phase 1 projects part of it, phase 2 the late events; a rebuild from
 * zero must give the same answers.
 */
const NOW = new Date('2026-03-15T10:30:00Z');
const GMAIL_MX = 'gmail-smtp-in.l.google.com';

describe('analytics routes (int)', function () {
  this.timeout(120_000);
  let motor: AnalyticsMotor;
  let a: BootstrapResult;
  let b: BootstrapResult;
  let c: BootstrapResult;
  let tokenA: string;
  let tokenB: string;
  const m = Array.from({ length: 9 }, () => randomUUID());
  const late: Array<[string, EventData[]]> = [];

  before(async () => {
    motor = await startAnalyticsMotor({ clock: { now: () => new Date(NOW) } });
    a = await motor.bootstrap();
    b = await motor.bootstrap();
    c = await motor.bootstrap();
    tokenA = await motor.token(a, ['analytics.read', 'usage.read']);
    tokenB = await motor.token(b, ['analytics.read', 'usage.read']);
    const A = a.motorBlockId;

    // M1: accepted 30 s before midnight (day 2026-03-14, hour 23); outcomes after midnight.
    await motor.append(m[1], [
      accepted(m[1], A, ['a1@gmail.com', 'a2@corp.test'], '2026-03-14T23:59:30Z'),
      started(m[1], 'a1@gmail.com', '2026-03-14T23:59:31Z'), started(m[1], 'a2@corp.test', '2026-03-14T23:59:31Z'),
      delivered(m[1], 'a1@gmail.com', '2026-03-15T00:00:10Z', GMAIL_MX),
      deferred(m[1], 'a2@corp.test', '2026-03-15T00:01:00Z', '451', '4.7.1', 'aspmx.l.google.com'),
      bounced(m[1], 'a2@corp.test', '2026-03-15T00:30:00Z', '550', '5.1.1', 'aspmx.l.google.com'),
    ]);
    // M2: accepted exactly at midnight (day 2026-03-15, hour 00); a duplicate recipient; b1 complains later (phase 2).
    await motor.append(m[2], [
      accepted(m[2], A, ['b1@outlook.com', 'b2@yahoo.com', 'b1@outlook.com'], '2026-03-15T00:00:00Z'),
      delivered(m[2], 'b1@outlook.com', '2026-03-15T00:05:00Z', 'outlook-com.olc.protection.outlook.com'),
      failed(m[2], 'b2@yahoo.com', '2026-03-15T00:10:00Z'),
    ]);
    late.push([m[2], [complained(m[2], 'b1@outlook.com', '2026-03-15T02:00:00Z')]]);
    // M3: bounced; the deferral that preceded it and a re-appended copy of the bounce arrive late (phase 2).
    await motor.append(m[3], [
      accepted(m[3], A, ['c1@corp.test'], '2026-03-15T09:15:00Z'),
      bounced(m[3], 'c1@corp.test', '2026-03-15T09:20:00Z', '550', '5.7.1', 'mx.corp.test'),
    ]);
    late.push([m[3], [
      deferred(m[3], 'c1@corp.test', '2026-03-15T09:16:00Z', '421', '4.4.2', 'mx.corp.test'),
      bounced(m[3], 'c1@corp.test', '2026-03-15T09:20:00Z', '550', '5.7.1', 'mx.corp.test'),
    ]]);
    // M4: still deferred.
    await motor.append(m[4], [
      accepted(m[4], A, ['d1@gmail.com'], '2026-03-15T09:40:00Z'),
      started(m[4], 'd1@gmail.com', '2026-03-15T09:40:01Z'),
      deferred(m[4], 'd1@gmail.com', '2026-03-15T09:41:00Z', '421', '4.7.0', GMAIL_MX),
    ]);
    // M5: four delivered on 03-10; e4 bounces asynchronously on 03-15 (phase 2).
    await motor.append(m[5], [
      accepted(m[5], A, ['e1@gmail.com', 'e2@gmail.com', 'e3@gmail.com', 'e4@gmail.com'], '2026-03-10T12:00:00Z'),
      ...['e1', 'e2', 'e3', 'e4'].map((e) => delivered(m[5], `${e}@gmail.com`, '2026-03-10T12:05:00Z', GMAIL_MX)),
    ]);
    late.push([m[5], [bounced(m[5], 'e4@gmail.com', '2026-03-15T08:00:00Z', '550', '5.2.2', GMAIL_MX)]]);
    // M6: outside the 30-day window.
    await motor.append(m[6], [accepted(m[6], A, ['f1@gmail.com'], '2026-02-01T12:00:00Z'), bounced(m[6], 'f1@gmail.com', '2026-02-01T12:01:00Z', '550', '5.1.1', GMAIL_MX)]);
    // M7: another block, today.
    await motor.append(m[7], [accepted(m[7], b.motorBlockId, ['g1@gmail.com'], '2026-03-15T09:00:00Z'), bounced(m[7], 'g1@gmail.com', '2026-03-15T09:01:00Z', '550', '5.1.1', GMAIL_MX)]);
    // M8: 990 recipients at bulk.test on 03-12, all delivered.
    const bulk = Array.from({ length: 990 }, (_, i) => `r${i}@bulk.test`);
    await motor.append(m[8], [accepted(m[8], A, bulk, '2026-03-12T06:00:00Z'), ...bulk.map((r) => delivered(m[8], r, '2026-03-12T06:01:00Z', 'mx.bulk.test'))]);
    // Block C: 100 recipients on 03-14, 20 bounced: score 0, throttled.
    const cr = Array.from({ length: 100 }, (_, i) => `x${i}@gmail.com`);
    await motor.append(m[0], [
      accepted(m[0], c.motorBlockId, cr, '2026-03-14T08:00:00Z'),
      ...cr.map((r, i) => (i < 20 ? bounced(m[0], r, '2026-03-14T08:01:00Z', '550', '5.1.1', GMAIL_MX) : delivered(m[0], r, '2026-03-14T08:01:00Z', GMAIL_MX))),
    ]);
    await motor.project();
  });
  after(async () => { await motor?.close(); });

  const get = (path: string, token: string | null = tokenA) => motor.get(path, token);
  const A = () => a.motorBlockId;

  it('phase 1: before the late events', async () => {
    const r = await get(`/motor-blocks/${A()}/overview?from=2026-03-15T00:00:00Z`);
    expect(r.status).to.equal(200);
    expect(r.body.data.totals).to.deep.equal({
      messages: 3, total: 4, delivered: 1, bounced: 1, complained: 0, failed: 1, deferred: 1,
      deliveryRate: 25, bounceRate: 25, complaintRate: 0, failRate: 25,
    });
    const rep = await get(`/motor-blocks/${A()}/reputation`);
    expect(rep.body.data.totals).to.deep.equal({ total: 1000, delivered: 996, bounced: 2, complained: 0, failed: 1 });
  });

  describe('phase 2: with the late and out-of-order events', () => {
    before(async () => {
      for (const [id, events] of late) await motor.append(id, events);
      await motor.project();
    });

    it('overview: the whole window by default, and a day or hour range', async () => {
      const all = await get(`/motor-blocks/${A()}/overview`);
      expect(all.status).to.equal(200);
      expect(all.body.data.totals).to.deep.equal({
        messages: 6, total: 1000, delivered: 994, bounced: 3, complained: 1, failed: 1, deferred: 1,
        deliveryRate: 99.5, bounceRate: 0.3, complaintRate: 0.1, failRate: 0.1,
      });
      expect(all.body.data.from).to.equal('2026-02-13T10:00:00.000Z');
      expect(all.body.data.to).to.equal('2026-03-15T10:59:59.999Z');
      const today = await get(`/motor-blocks/${A()}/overview?from=2026-03-15T00:00:00Z&to=2026-03-15T10:30:00Z`);
      expect(today.body.data.totals).to.deep.equal({
        messages: 3, total: 4, delivered: 0, bounced: 1, complained: 1, failed: 1, deferred: 1,
        deliveryRate: 25, bounceRate: 25, complaintRate: 25, failRate: 25,
      });
      // 23:59:59 is widened to its whole hour: the send accepted at 23:59:30 on the 14th.
      const hour = await get(`/motor-blocks/${A()}/overview?from=2026-03-14T23:59:59Z&to=2026-03-14T23:59:59Z`);
      expect(hour.body.data.totals).to.deep.equal({
        messages: 1, total: 2, delivered: 1, bounced: 1, complained: 0, failed: 0, deferred: 0,
        deliveryRate: 50, bounceRate: 50, complaintRate: 0, failRate: 0,
      });
    });

    it('daily-summary: UTC days, today included', async () => {
      const r = await get(`/motor-blocks/${A()}/daily-summary?days=2`);
      expect(r.status).to.equal(200);
      expect(r.body.data).to.deep.equal({
        days: 2, retentionDays: 30,
        items: [
          { date: '2026-03-14', messages: 1, total: 2, delivered: 1, bounced: 1, complained: 0, failed: 0, deferred: 0, deliveryRate: 50, bounceRate: 50, complaintRate: 0, failRate: 0 },
          { date: '2026-03-15', messages: 3, total: 4, delivered: 0, bounced: 1, complained: 1, failed: 1, deferred: 1, deliveryRate: 25, bounceRate: 25, complaintRate: 25, failRate: 25 },
        ],
      });
      const week = await get(`/motor-blocks/${A()}/daily-summary`);
      expect(week.body.data.items.map((d: { date: string; total: number }) => [d.date, d.total])).to.deep.equal([
        ['2026-03-09', 0], ['2026-03-10', 4], ['2026-03-11', 0], ['2026-03-12', 990], ['2026-03-13', 0], ['2026-03-14', 2], ['2026-03-15', 4],
      ]);
      expect((await get(`/motor-blocks/${A()}/daily-summary?days=30`)).body.data.items).to.have.length(30);
      const over = await get(`/motor-blocks/${A()}/daily-summary?days=31`);
      expect([over.status, over.body.code]).to.deep.equal([400, 'outside_retention_window']);
      for (const bad of ['0', '-1', '1.5', 'x']) {
        const x = await get(`/motor-blocks/${A()}/daily-summary?days=${bad}`);
        expect([x.status, x.body.code], bad).to.deep.equal([400, 'invalid_query']);
      }
    });

    it('metrics: hour and day series, zero-filled', async () => {
      const h = await get(`/motor-blocks/${A()}/metrics?interval=hour&from=2026-03-14T22:00:00Z&to=2026-03-15T01:30:00Z`);
      expect(h.status).to.equal(200);
      const zero = { messages: 0, total: 0, delivered: 0, bounced: 0, complained: 0, failed: 0, deferred: 0, deliveryRate: 0, bounceRate: 0, complaintRate: 0, failRate: 0 };
      expect(h.body.data).to.deep.equal({
        interval: 'hour', from: '2026-03-14T22:00:00.000Z', to: '2026-03-15T01:59:59.999Z',
        points: [
          { start: '2026-03-14T22:00:00.000Z', ...zero },
          { start: '2026-03-14T23:00:00.000Z', ...zero, messages: 1, total: 2, delivered: 1, bounced: 1, deliveryRate: 50, bounceRate: 50 },
          { start: '2026-03-15T00:00:00.000Z', ...zero, messages: 1, total: 2, complained: 1, failed: 1, deliveryRate: 50, complaintRate: 50, failRate: 50 },
          { start: '2026-03-15T01:00:00.000Z', ...zero },
        ],
      });
      const d = await get(`/motor-blocks/${A()}/metrics?interval=day&from=2026-03-10T00:00:00Z`);
      expect(d.body.data.points.map((p: { start: string; messages: number; total: number; delivered: number; bounced: number }) => [p.start.slice(0, 10), p.messages, p.total, p.delivered, p.bounced])).to.deep.equal([
        ['2026-03-10', 1, 4, 3, 1], ['2026-03-11', 0, 0, 0, 0], ['2026-03-12', 1, 990, 990, 0], ['2026-03-13', 0, 0, 0, 0], ['2026-03-14', 1, 2, 1, 1], ['2026-03-15', 3, 4, 0, 1],
      ]);
      for (const q of ['', '?interval=week', '?interval=HOUR']) {
        const x = await get(`/motor-blocks/${A()}/metrics${q}`);
        expect([x.status, x.body.code], q).to.deep.equal([400, 'invalid_query']);
      }
    });

    it('deliverability: per recipient domain, most recipients first', async () => {
      const r = await get(`/motor-blocks/${A()}/deliverability`);
      expect(r.status).to.equal(200);
      expect(r.body.data).to.deep.equal([
        { domain: 'bulk.test', total: 990, delivered: 990, bounced: 0, complained: 0, failed: 0, deferred: 0, deliveryRate: 100, bounceRate: 0, complaintRate: 0 },
        { domain: 'gmail.com', total: 6, delivered: 4, bounced: 1, complained: 0, failed: 0, deferred: 1, deliveryRate: 66.67, bounceRate: 16.67, complaintRate: 0 },
        { domain: 'corp.test', total: 2, delivered: 0, bounced: 2, complained: 0, failed: 0, deferred: 0, deliveryRate: 0, bounceRate: 100, complaintRate: 0 },
        { domain: 'outlook.com', total: 1, delivered: 0, bounced: 0, complained: 1, failed: 0, deferred: 0, deliveryRate: 100, bounceRate: 0, complaintRate: 100 },
        { domain: 'yahoo.com', total: 1, delivered: 0, bounced: 0, complained: 0, failed: 1, deferred: 0, deliveryRate: 0, bounceRate: 0, complaintRate: 0 },
      ]);
      expect((await get(`/motor-blocks/${A()}/deliverability?limit=2`)).body.data.map((x: { domain: string }) => x.domain)).to.deep.equal(['bulk.test', 'gmail.com']);
      // A range cut inside days: hourly edges plus whole days (03-11 .. 03-14 whole, 03-10 from 12:00, 03-15 until 00:59).
      const cut = await get(`/motor-blocks/${A()}/deliverability?from=2026-03-10T12:00:00Z&to=2026-03-15T00:59:00Z`);
      expect(cut.body.data.map((x: { domain: string; total: number }) => [x.domain, x.total])).to.deep.equal([
        ['bulk.test', 990], ['gmail.com', 5], ['corp.test', 1], ['outlook.com', 1], ['yahoo.com', 1],
      ]);
      for (const limit of ['0', '201', '2.5']) {
        const x = await get(`/motor-blocks/${A()}/deliverability?limit=${limit}`);
        expect([x.status, x.body.code], limit).to.deep.equal([400, 'invalid_query']);
      }
    });

    it('providers: by MX host, by domain name when never reached', async () => {
      const r = await get(`/motor-blocks/${A()}/providers`);
      expect(r.status).to.equal(200);
      expect(r.body.data).to.deep.equal([
        { provider: 'other', domains: 2, total: 991, delivered: 990, bounced: 1, complained: 0, failed: 0, deferred: 0, deliveryRate: 99.9, bounceRate: 0.1, complaintRate: 0 },
        { provider: 'gmail', domains: 2, total: 7, delivered: 4, bounced: 2, complained: 0, failed: 0, deferred: 1, deliveryRate: 57.14, bounceRate: 28.57, complaintRate: 0 },
        { provider: 'outlook', domains: 1, total: 1, delivered: 0, bounced: 0, complained: 1, failed: 0, deferred: 0, deliveryRate: 100, bounceRate: 0, complaintRate: 100 },
        { provider: 'yahoo', domains: 1, total: 1, delivered: 0, bounced: 0, complained: 0, failed: 1, deferred: 0, deliveryRate: 0, bounceRate: 0, complaintRate: 0 },
      ]);
      expect((await get(`/motor-blocks/${A()}/providers?limit=1`)).body.data).to.have.length(1);
    });

    it('error-codes: latest reply of bounced, failed and deferred recipients', async () => {
      const r = await get(`/motor-blocks/${A()}/error-codes`);
      expect(r.status).to.equal(200);
      const row = (smtpCode: string | null, enhancedCode: string | null, o: 'bounced' | 'failed' | 'deferred') =>
        ({ smtpCode, enhancedCode, count: 1, bounced: 0, failed: 0, deferred: 0, [o]: 1, percentage: 20 });
      expect(r.body.data).to.deep.equal({
        total: 5,
        codes: [row(null, null, 'failed'), row('421', '4.7.0', 'deferred'), row('550', '5.1.1', 'bounced'), row('550', '5.2.2', 'bounced'), row('550', '5.7.1', 'bounced')],
      });
      expect((await get(`/motor-blocks/${A()}/error-codes?limit=2`)).body.data.codes).to.have.length(2);
    });

    it('reputation: the documented formula over the retention window', async () => {
      const r = await get(`/motor-blocks/${A()}/reputation`);
      expect(r.body.data).to.deep.equal({
        score: 78, windowDays: 30,
        totals: { total: 1000, delivered: 994, bounced: 3, complained: 1, failed: 1 },
        rates: { bounceRate: 0.3, complaintRate: 0.1, failRate: 0.1 },
      });
    });

    it('anomalies: today 25 % against a 14-day average of 0.2 %', async () => {
      const r = await get(`/motor-blocks/${A()}/anomalies`);
      expect(r.body.data).to.deep.equal({ anomalies: [{ type: 'bounce_rate_spike', todayRate: 25, avgRate: 0.2 }], windowDays: 14 });
      const other = await get(`/motor-blocks/${b.motorBlockId}/anomalies`, tokenB);
      expect(other.body.data).to.deep.equal({ anomalies: [{ type: 'bounce_rate_spike', todayRate: 100, avgRate: 0 }], windowDays: 14 });
    });

    it('blocks are isolated', async () => {
      const r = await get(`/motor-blocks/${b.motorBlockId}/overview`, tokenB);
      expect(r.body.data.totals).to.include({ messages: 1, total: 1, bounced: 1 });
    });

    it('retention and time parameters', async () => {
      for (const q of ['from=2026-02-01T00:00:00Z', 'to=2026-02-01T00:00:00Z']) {
        const x = await get(`/motor-blocks/${A()}/overview?${q}`);
        expect([x.status, x.body.code], q).to.deep.equal([400, 'outside_retention_window']);
      }
      for (const q of ['from=yesterday', 'from=2026-02-30T00:00:00Z', 'to=2026-03-15T25:00:00Z', 'from=2026-03-15T10:00:00Z&to=2026-03-15T09:00:00Z']) {
        const x = await get(`/motor-blocks/${A()}/deliverability?${q}`);
        expect([x.status, x.body.code], q).to.deep.equal([400, 'invalid_query']);
      }
      const offset = await get(`/motor-blocks/${A()}/overview?from=2026-03-15T01:00:00%2B01:00&to=2026-03-15T10:30:00Z`);
      expect(offset.body.data.totals.total).to.equal(4);
    });

    it('scopes and block binding', async () => {
      const logsOnly = await motor.token(a, ['logs.read']);
      for (const path of ['overview', 'daily-summary', 'metrics?interval=day', 'deliverability', 'providers', 'error-codes', 'reputation', 'anomalies']) {
        const x = await get(`/motor-blocks/${A()}/${path}`, logsOnly);
        expect([x.status, x.body.code], path).to.deep.equal([403, 'insufficient_scope']);
        const y = await get(`/motor-blocks/${A()}/${path}`, tokenB);
        expect([y.status, y.body.code], path).to.deep.equal([403, 'motor_block_forbidden']);
        const z = await get(`/motor-blocks/${A()}/${path}`, null);
        expect(z.status, path).to.equal(401);
      }
      const analyticsOnly = await motor.token(a, ['analytics.read']);
      expect((await get(`/motor-blocks/${A()}/overview`, analyticsOnly)).status).to.equal(403);
      expect((await get(`/motor-blocks/${A()}/reputation`, analyticsOnly)).status).to.equal(200);
    });

    it('a motorBlockId query naming another block than the path → 400 motor_block_id_conflict; the same block (any case) is fine', async () => {
      for (const path of ['overview', 'reputation', 'rate-limits', 'logs']) {
        const token = await motor.token(a, ['analytics.read', 'usage.read', 'logs.read']);
        const other = await get(`/motor-blocks/${A()}/${path}?motorBlockId=${b.motorBlockId}`, token);
        expect([other.status, other.body.code], path).to.deep.equal([400, 'motor_block_id_conflict']);
        const twice = await get(`/motor-blocks/${A()}/${path}?motorBlockId=${A()}&motorBlockId=${b.motorBlockId}`, token);
        expect([twice.status, twice.body.code], path).to.deep.equal([400, 'motor_block_id_conflict']);
        const same = await get(`/motor-blocks/${A()}/${path}?motorBlockId=${A().toUpperCase()}`, token);
        expect(same.status, path).to.equal(200);
      }
      // Authentication first: no credential is 401 whatever the query names.
      expect((await get(`/motor-blocks/${A()}/overview?motorBlockId=${b.motorBlockId}`, null)).status).to.equal(401);
    });

    it('a rebuild from zero gives identical answers', async () => {
      const paths = [
        'overview', 'overview?from=2026-03-15T00:00:00Z', 'daily-summary?days=30', 'metrics?interval=hour', 'metrics?interval=day', 'deliverability',
        'providers', 'error-codes', 'reputation', 'anomalies',
      ];
      const before = await Promise.all(paths.map((p) => get(`/motor-blocks/${A()}/${p}`)));
      await rebuild(motor.rt.db, motor.rt.store, analyticsProjection, { batchSize: 50 });
      const after = await Promise.all(paths.map((p) => get(`/motor-blocks/${A()}/${p}`)));
      for (let i = 0; i < paths.length; i++) {
        expect(after[i].status, paths[i]).to.equal(200);
        expect(after[i].body, paths[i]).to.deep.equal(before[i].body);
      }
    });

    describe('rate limits', () => {
      it('block: plan ceilings, nothing used, resets of the current windows', async () => {
        const r = await get(`/motor-blocks/${A()}/rate-limits`);
        expect(r.status).to.equal(200);
        expect(r.body.warning).to.equal(undefined);
        const cfg = motor.config.defaultPlan;
        expect(r.body.data).to.deep.equal({
          burst: { used: 0, limit: cfg.burst, remaining: cfg.burst, percentage: 0, resetIn: 60 },
          hourly: { used: 0, limit: cfg.hourly, remaining: cfg.hourly, percentage: 0, resetIn: 1800 },
          daily: { used: 0, limit: cfg.daily, remaining: cfg.daily, percentage: 0, resetIn: 48600 },
          limits: { burst: cfg.burst, hourly: cfg.hourly, daily: cfg.daily },
          throttled: false, throttleReason: null, timestamp: NOW.toISOString(),
        });
        expect((await get(`/motor-blocks/${A()}/rate-limits`, await motor.token(a, ['analytics.read']))).status).to.equal(403);
      });

      it('a low reputation lowers the effective ceiling, and the send path enforces it', async () => {
        await motor.setLimits(c.motorBlockId, { burst: 8, hourly: 100, daily: 1000 });
        const tokenC = await motor.token(c, ['usage.read', 'analytics.read']);
        expect((await get(`/motor-blocks/${c.motorBlockId}/reputation`, tokenC)).body.data.score).to.equal(0);
        const r = await get(`/motor-blocks/${c.motorBlockId}/rate-limits`, tokenC);
        expect(r.body.data).to.deep.include({ limits: { burst: 8, hourly: 100, daily: 1000 }, throttled: true, throttleReason: 'reputation_critical' });
        expect(r.body.data.burst).to.deep.equal({ used: 0, limit: 2, remaining: 2, percentage: 0, resetIn: 60 });
        expect(r.body.data.hourly.limit).to.equal(25);
        expect(r.body.data.daily.limit).to.equal(250);

        const send = (to: string | string[] = 'u@rcpt.test') => postJson(`${motor.baseUrl}/v1/send`, { from: `app@${senderDomainOf(c)}`, to, subject: 'Hi', text: 'x' }, { 'X-Api-Key': c.apiKey });
        // Three recipients never fit the lowered burst of 2: refused for good, charged nothing.
        const tooMany = await send(['u1@rcpt.test', 'u2@rcpt.test', 'u3@rcpt.test']);
        expect(tooMany.status).to.equal(422);
        expect(tooMany.body).to.include({ code: 'recipients_exceed_limit', dimension: 'burst', limit: 2, recipientCount: 3, throttleReason: 'reputation_critical' });
        expect((await send()).status).to.equal(200);
        expect((await send()).status).to.equal(200);
        const refused = await send();
        expect(refused.status).to.equal(429);
        expect(refused.body).to.include({ success: false, code: 'rate_limited_block', retryAfterSeconds: 60, throttleReason: 'reputation_critical' });
        expect(refused.headers.get('retry-after')).to.equal('60');
        expect(refused.headers.get('ratelimit-limit')).to.equal('2');
        const after = await get(`/motor-blocks/${c.motorBlockId}/rate-limits`, tokenC);
        expect(after.body.data.burst).to.deep.equal({ used: 2, limit: 2, remaining: 0, percentage: 100, resetIn: 60 });
        expect(after.body.data.daily).to.deep.equal({ used: 2, limit: 250, remaining: 248, percentage: 0.8, resetIn: 48600 });
        const acct = await get('/account/rate-limits', tokenC);
        expect(acct.body.data).to.deep.equal({
          source: 'plan', timestamp: NOW.toISOString(), enforced: false,
          hourly: { used: 2, limit: motor.config.defaultPlan.accountHourly, remaining: motor.config.defaultPlan.accountHourly - 2, resetIn: 1800 },
          daily: { used: 2, limit: motor.config.defaultPlan.accountDaily, remaining: motor.config.defaultPlan.accountDaily - 2, resetIn: 48600 },
        });
      });
    });
  });
});
