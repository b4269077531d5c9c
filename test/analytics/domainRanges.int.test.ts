import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { byProvider, deliverabilityByDomain } from '../../projections/analytics/queries';
import { accepted, bounced, delivered, startAnalyticsMotor, type AnalyticsMotor } from './support';

/**
 * Domain ranges read whole days from domain_daily and the partial edge days either hour by hour or
 * as "whole day minus the hours outside the range" (projections/analytics/queries.ts). Both must
 * give exactly what summing domain_hourly over the range gives: checked for many ranges whose
 * edges fall at every few hours of three days with traffic, including ranges that end after now.
 */
const HOUR = 3_600_000;
const BLOCK = randomUUID();
const DAY0 = Date.UTC(2026, 10, 10);

describe('analytics domain ranges (int)', function () {
  this.timeout(120_000);
  let motor: AnalyticsMotor;

  before(async () => {
    motor = await startAnalyticsMotor();
    const domains = ['gmail.com', 'yahoo.com', 'a.test', 'b.test', 'c.test'];
    for (let h = 0; h < 72; h += 1) {
      if (h % 7 === 3) continue; // some empty hours
      const id = randomUUID();
      const to = [`u${h}@${domains[h % 5]}`, `v${h}@${domains[(h * 3 + 1) % 5]}`];
      const at = new Date(DAY0 + h * HOUR + 600_000).toISOString();
      const out = new Date(DAY0 + h * HOUR + 700_000).toISOString();
      await motor.append(id, [
        accepted(id, BLOCK, to, at),
        delivered(id, to[0], out, 'mx.example.net'),
        h % 4 === 0 ? bounced(id, to[1], out, '550', '5.1.1', 'gmail-smtp-in.l.google.com') : delivered(id, to[1], out, 'mx.example.net'),
      ]);
    }
    await motor.project();
  });
  after(async () => { await motor?.close(); });

  it('every range gives the sums of its hours, per domain and per provider', async () => {
    const db = motor.rt.db;
    let checked = 0;
    for (let a = -2; a < 74; a += 5) {
      for (let b = a; b < 80; b += 7) {
        const range = { fromHour: new Date(DAY0 + a * HOUR), toHour: new Date(DAY0 + b * HOUR) };
        const brute = await db.raw(
          `select domain, sum(total)::int8 as total, sum(delivered)::int8 as delivered, sum(bounced)::int8 as bounced
           from rm_analytics.domain_hourly where motor_block_id = ? and hour >= ? and hour <= ? group by domain having sum(total) <> 0
           order by sum(total) desc, domain asc`,
          [BLOCK, range.fromHour, range.toHour],
        );
        const got = await deliverabilityByDomain(db, BLOCK, range, 200);
        expect(got.map((r) => [r.domain, r.total, r.delivered, r.bounced]), `${a}..${b}`)
          .to.deep.equal((brute.rows as Array<Record<string, string>>).map((r) => [r.domain, Number(r.total), Number(r.delivered), Number(r.bounced)]));
        const providers = await byProvider(db, BLOCK, range, 20);
        const bruteP = await db.raw(
          `select provider, sum(total)::int8 as total from rm_analytics.domain_hourly where motor_block_id = ? and hour >= ? and hour <= ? group by provider`,
          [BLOCK, range.fromHour, range.toHour],
        );
        const byName = new Map((bruteP.rows as Array<{ provider: string; total: string }>).map((r) => [r.provider, Number(r.total)]));
        for (const p of providers) expect(p.total, `${a}..${b} ${p.provider}`).to.equal(byName.get(p.provider) ?? 0);
        checked++;
      }
    }
    expect(checked).to.be.greaterThan(100);
  });
});
