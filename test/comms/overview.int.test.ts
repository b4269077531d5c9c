import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { EventData } from '../../domain/eventStore';
import { accepted, bounced, complained, deferred, delivered, failed, started } from '../analytics/support';
import { oauthBlock } from '../oauth/support';
import { eventually, startTestMotor, type TestMotor } from '../support/motor';
import { as, commGet, tenant, type Tenant } from './support';

/**
 * GET /comm-api/api/analytics/overview (docs/COMMUNICATIONS.md "Analytics overview"): the analytics
 * rollups of every block of the tenant summed, over known events, with the rates of docs/ANALYTICS.md.
 */
describe('communications analytics overview (int)', function () {
  this.timeout(120_000);
  let motor: TestMotor;
  let a: Tenant;
  let b: Tenant;
  const now = Date.now();
  const today = new Date(now).toISOString();
  const yesterday = new Date(now - 86_400_000).toISOString();
  const longAgo = new Date(now - 40 * 86_400_000).toISOString();
  const later = (iso: string, s: number) => new Date(Date.parse(iso) + s * 1000).toISOString();
  const date = (iso: string) => iso.slice(0, 10);

  const send = async (accountId: string, motorBlockId: string, to: string[], at: string, outcomes: (m: string) => EventData[]) => {
    const m = randomUUID();
    await motor.rt.store.append(`message-${m}`, [accepted(m, motorBlockId, to, at, accountId), ...outcomes(m)], { expectedRevision: 'no_stream' });
  };
  const overview = (who: Tenant, query = '') => commGet(motor, `/analytics/overview${query}`, as(who));

  before(async () => {
    motor = await startTestMotor();
    a = await tenant(motor, 'overview-a@example.test');
    b = await tenant(motor, 'overview-b@example.test');
    const second = (await oauthBlock(motor, a.b, 'Second block')).motorBlockId;
    // Today, block 1: 3 recipients (delivered, bounced, deferred) and 1 recipient that failed.
    await send(a.accountId, a.b.motorBlockId, ['d1@x.test', 'b1@x.test', 'q1@x.test'], today, (m) => [
      started(m, 'd1@x.test', later(today, 0.1)), delivered(m, 'd1@x.test', later(today, 0.2), 'mx.x.test'),
      bounced(m, 'b1@x.test', later(today, 0.2), '550', '5.1.1', 'mx.x.test'), deferred(m, 'q1@x.test', later(today, 0.2), '451', '4.7.1', 'mx.x.test'),
    ]);
    await send(a.accountId, a.b.motorBlockId, ['f1@nomx.test'], today, (m) => [failed(m, 'f1@nomx.test', later(today, 0.3))]);
    // Today, block 2: one delivered, one delivered then complained.
    await send(a.accountId, second, ['d2@y.test', 'c2@y.test'], today, (m) => [
      delivered(m, 'd2@y.test', later(today, 0.2), 'mx.y.test'), delivered(m, 'c2@y.test', later(today, 0.2), 'mx.y.test'), complained(m, 'c2@y.test', later(today, 0.4)),
    ]);
    // Yesterday, block 2: one delivered (its outcome arrives today: it still counts yesterday).
    await send(a.accountId, second, ['d3@y.test'], yesterday, (m) => [delivered(m, 'd3@y.test', today, 'mx.y.test')]);
    // Outside the 30-day window, and another tenant's traffic: never counted for A.
    await send(a.accountId, a.b.motorBlockId, ['old@x.test'], longAgo, (m) => [delivered(m, 'old@x.test', later(longAgo, 1), 'mx.x.test')]);
    await send(b.accountId, b.b.motorBlockId, ['other@z.test', 'other2@z.test'], today, (m) => [bounced(m, 'other@z.test', later(today, 0.2), '550', '5.1.1', 'mx.z.test')]);
    await eventually(async () => {
      const r = await overview(a);
      return r.body.data?.totals.total === 7 && r.body.data.totals.complained === 1 && (await overview(b)).body.data?.totals.total === 2;
    }, 30_000);
  });
  after(async () => { await motor?.close(); });

  it('default: the last 30 UTC days across every block of the tenant, totals and rates as docs/ANALYTICS.md defines them', async () => {
    const r = await overview(a);
    expect(r.status).to.equal(200);
    const d = r.body.data;
    expect(d.days).to.equal(30);
    expect(d.blocks).to.equal(2);
    expect(d.totals).to.deep.equal({
      messages: 4, total: 7, delivered: 3, bounced: 1, complained: 1, failed: 1, deferred: 1,
      deliveryRate: 57.14, bounceRate: 14.29, complaintRate: 14.29, failRate: 14.29,
    });
    expect(d.daily).to.have.length(30);
    expect(d.from).to.equal(`${d.daily[0].date}T00:00:00.000Z`);
    expect(d.daily[29].date).to.equal(date(new Date(now).toISOString()));
    const byDate = Object.fromEntries(d.daily.map((x: { date: string; total: number }) => [x.date, x]));
    expect(byDate[date(today)]).to.include({ messages: 3, total: 6, delivered: 2, bounced: 1, complained: 1, failed: 1, deferred: 1, deliveryRate: 50 });
    expect(byDate[date(yesterday)]).to.include({ messages: 1, total: 1, delivered: 1, deliveryRate: 100 });
    const others = d.daily.filter((x: { date: string }) => x.date !== date(today) && x.date !== date(yesterday));
    expect(others.every((x: { total: number }) => x.total === 0), 'zero-filled').to.equal(true);
    expect(d.daily.reduce((s: number, x: { total: number }) => s + x.total, 0)).to.equal(d.totals.total);
  });

  it('days narrows the window; another tenant has its own figures', async () => {
    const one = (await overview(a, '?days=1')).body.data;
    expect(one.daily.map((x: { date: string }) => x.date)).to.deep.equal([date(new Date(now).toISOString())]);
    expect(one.totals).to.include({ messages: 3, total: 6, delivered: 2, bounced: 1, complained: 1, failed: 1, deferred: 1, deliveryRate: 50, bounceRate: 16.67 });
    const bTotals = (await overview(b)).body.data.totals;
    expect(bTotals).to.include({ messages: 1, total: 2, bounced: 1, delivered: 0, bounceRate: 50 });
  });

  it('days: 1 to 90 (400 invalid_query), within the plan retention (400 outside_retention_window)', async () => {
    for (const q of ['?days=0', '?days=91', '?days=2.5', '?days=abc']) {
      const r = await overview(a, q);
      expect([r.status, r.body.code], q).to.deep.equal([400, 'invalid_query']);
    }
    const retention = motor.config.defaultPlan.retentionDays;
    const over = await overview(a, `?days=${retention + 1}`);
    expect([over.status, over.body.code, over.body.retentionDays]).to.deep.equal([400, 'outside_retention_window', retention]);
    expect((await overview(a, `?days=${retention}`)).status).to.equal(200);
  });
});
