import { expect } from 'chai';
import { classifyProvider, providerOfDomain, providerOfMx } from '../../domain/analytics/providers';
import { deliveryRate, percent } from '../../domain/analytics/rates';
import { reputationOf, reputationScore } from '../../domain/analytics/reputation';
import { detectAnomalies } from '../../domain/analytics/anomalies';
import { effectiveLimits, reputationThrottle } from '../../domain/analytics/throttle';
import { WARMUP_SCHEDULE, warmupCap, warmupDay } from '../../domain/analytics/warmup';
import { loadConfig } from '../../infra/config';
import { sendPolicyOf } from '../../projections/analytics/sendPolicy';

const totals = (total: number, bounced = 0, complained = 0, failed = 0) => ({ total, delivered: total - bounced - complained - failed, bounced, complained, failed });

describe('analytics rules (unit)', () => {
  describe('provider classification', () => {
    it('classifies by the MX host first', () => {
      expect(providerOfMx('gmail-smtp-in.l.google.com')).to.equal('gmail');
      expect(providerOfMx('ASPMX.L.GOOGLE.COM.')).to.equal('gmail');
      expect(providerOfMx('alt1.aspmx.l.googlemail.com')).to.equal('gmail');
      expect(providerOfMx('corp-com.mail.protection.outlook.com')).to.equal('outlook');
      expect(providerOfMx('hotmail-com.olc.protection.outlook.com')).to.equal('outlook');
      expect(providerOfMx('mta5.am0.yahoodns.net')).to.equal('yahoo');
      expect(providerOfMx('mx.corp.test')).to.equal('other');
      expect(providerOfMx('notgoogle.com')).to.equal('other');
      expect(providerOfMx(null)).to.equal(null);
      expect(providerOfMx('')).to.equal(null);
    });
    it('a company domain hosted by Google is gmail; an unreached gmail.com recipient is gmail by name', () => {
      expect(classifyProvider('corp.test', 'aspmx.l.google.com')).to.equal('gmail');
      expect(classifyProvider('gmail.com', null)).to.equal('gmail');
      expect(classifyProvider('gmail.com', 'mx.relay.test')).to.equal('other');
    });
    it('falls back to the domain name', () => {
      expect(providerOfDomain('googlemail.com')).to.equal('gmail');
      expect(providerOfDomain('hotmail.co.uk')).to.equal('outlook');
      expect(providerOfDomain('live.com')).to.equal('outlook');
      expect(providerOfDomain('yahoo.fr')).to.equal('yahoo');
      expect(providerOfDomain('aol.com')).to.equal('yahoo');
      expect(providerOfDomain('example.org')).to.equal('other');
    });
  });

  describe('rates', () => {
    it('percentages with 2 decimals, 0 on an empty denominator', () => {
      expect(percent(1, 3)).to.equal(33.33);
      expect(percent(2, 3)).to.equal(66.67);
      expect(percent(0, 0)).to.equal(0);
      expect(deliveryRate({ total: 4, delivered: 1, complained: 1, bounced: 1, failed: 1 })).to.equal(50);
    });
  });

  describe('reputation', () => {
    it('100 − 5·bounce% − 200·complaint% − 2·fail%, rounded and clamped', () => {
      expect(reputationScore(totals(0))).to.equal(100);
      expect(reputationScore(totals(1000))).to.equal(100);
      expect(reputationScore(totals(1000, 3, 1, 1))).to.equal(78); // 100 − 1.5 − 20 − 0.2 = 78.3
      expect(reputationScore(totals(100, 2))).to.equal(90);
      expect(reputationScore(totals(100, 10, 0, 5))).to.equal(40);
      expect(reputationScore(totals(100, 0, 1))).to.equal(0);
      expect(reputationScore(totals(100, 50))).to.equal(0);
    });
    it('reports totals and rates in percent', () => {
      expect(reputationOf(totals(1000, 3, 1, 1), 30)).to.deep.equal({
        score: 78, windowDays: 30, totals: { total: 1000, delivered: 995, bounced: 3, complained: 1, failed: 1 },
        rates: { bounceRate: 0.3, complaintRate: 0.1, failRate: 0.1 },
      });
    });
  });

  describe('anomaly rule', () => {
    it('flags today > 2 × avg + 2 points (pooled average)', () => {
      // avg = 2/100 = 2 %; threshold 2·2 + 2 = 6 %.
      expect(detectAnomalies({ total: 100, bounced: 6 }, [{ total: 50, bounced: 1 }, { total: 50, bounced: 1 }])).to.deep.equal([]);
      expect(detectAnomalies({ total: 100, bounced: 7 }, [{ total: 50, bounced: 1 }, { total: 50, bounced: 1 }])).to.deep.equal([
        { type: 'bounce_rate_spike', todayRate: 7, avgRate: 2 },
      ]);
    });
    it('no history: more than 2 points is flagged; no traffic today: nothing', () => {
      expect(detectAnomalies({ total: 100, bounced: 2 }, [])).to.deep.equal([]);
      expect(detectAnomalies({ total: 100, bounced: 3 }, [])).to.deep.equal([{ type: 'bounce_rate_spike', todayRate: 3, avgRate: 0 }]);
      expect(detectAnomalies({ total: 0, bounced: 0 }, [{ total: 10, bounced: 0 }])).to.deep.equal([]);
    });
  });

  describe('throttle', () => {
    it('needs 100 recipients, then tiers below 70 and 50', () => {
      expect(reputationThrottle({ score: 0, totals: totals(99, 50) })).to.equal(null);
      expect(reputationThrottle({ score: 70, totals: totals(100) })).to.equal(null);
      expect(reputationThrottle({ score: 69, totals: totals(100) })).to.deep.equal({ factor: 0.5, reason: 'reputation_low', score: 69 });
      expect(reputationThrottle({ score: 49, totals: totals(100) })).to.deep.equal({ factor: 0.25, reason: 'reputation_critical', score: 49 });
    });
    it('lowers every ceiling, never below 1, and keeps the raw limits', () => {
      const e = effectiveLimits({ burst: 3, hourly: 10, daily: 1001 }, { factor: 0.25, reason: 'reputation_critical', score: 10 });
      expect(e).to.deep.equal({ limits: { burst: 3, hourly: 10, daily: 1001 }, effective: { burst: 1, hourly: 2, daily: 250 }, throttled: true, throttleReason: 'reputation_critical' });
      expect(effectiveLimits({ burst: 3, hourly: 10, daily: 100 }, null)).to.deep.equal({ limits: { burst: 3, hourly: 10, daily: 100 }, effective: { burst: 3, hourly: 10, daily: 100 }, throttled: false, throttleReason: null });
    });
  });

  describe('warm-up schedule', () => {
    const added = new Date('2026-03-01T23:59:00Z');
    it('day 1 is the UTC day the domain was added', () => {
      expect(warmupDay(added, new Date('2026-03-01T23:59:30Z'))).to.equal(1);
      expect(warmupDay(added, new Date('2026-03-02T00:00:00Z'))).to.equal(2);
      expect(warmupCap(added, new Date('2026-03-02T00:00:00Z'))).to.deep.equal({ day: 2, dailyCap: 100 });
      expect(warmupCap(added, new Date('2026-03-14T12:00:00Z'))).to.deep.equal({ day: 14, dailyCap: WARMUP_SCHEDULE[13] });
      expect(warmupCap(added, new Date('2026-03-15T00:00:00Z'))).to.equal(null);
      expect(warmupDay(added, new Date('2026-02-01T00:00:00Z'))).to.equal(1);
    });
  });
});

describe('send policy (unit)', () => {
  const now = new Date('2026-03-15T10:30:00Z');
  const block = { id: 'b', limits: { burst: null, hourly: 500, daily: null } };

  it('plan ceilings under the block limits; unknown plan = fallback account ceilings', () => {
    const config = loadConfig({});
    const p = sendPolicyOf(config, { block, accountPlan: 'free', domainId: null }, null, now);
    expect(p.planSource).to.equal('plan');
    expect(p.block.limits).to.deep.equal({ burst: 10, hourly: 500, daily: 1000 });
    expect(p.account).to.deep.equal({ hourly: 200, daily: 2000 });
    const f = sendPolicyOf(config, { block, accountPlan: 'nope', domainId: null }, null, now);
    expect(f.planSource).to.equal('fallback');
    expect(f.account).to.deep.equal(config.accountFallback);
  });

  it('warm-up lowers the daily ceiling only when enforced; a reputation throttle keeps its reason', () => {
    const added = new Date('2026-03-14T08:00:00Z'); // day 2: 100
    const domain = { domainId: 'd', domainFirstSendAt: added };
    const off = sendPolicyOf(loadConfig({}), { block, accountPlan: 'pro', ...domain }, null, now);
    expect([off.block.effective.daily, off.block.throttled, off.warmupBinding]).to.deep.equal([100_000, false, false]);
    const on = sendPolicyOf(loadConfig({ ENFORCE_WARMUP: 'true' }), { block, accountPlan: 'pro', ...domain }, null, now);
    expect([on.block.effective.daily, on.block.throttled, on.block.throttleReason, on.warmupBinding]).to.deep.equal([100, true, 'domain_warmup', true]);
    // The block's own counters keep its ceiling: the cap is checked on the domain's counter.
    expect(on.blockQuota.daily).to.equal(100_000);
    // A domain that has not sent yet starts its schedule today (day 1: 50); no domain, no warm-up.
    const fresh = sendPolicyOf(loadConfig({ ENFORCE_WARMUP: 'true' }), { block, accountPlan: 'pro', domainId: 'd', domainFirstSendAt: null }, null, now);
    expect([fresh.warmup, fresh.block.effective.daily]).to.deep.equal([{ day: 1, dailyCap: 50 }, 50]);
    expect(sendPolicyOf(loadConfig({ ENFORCE_WARMUP: 'true' }), { block, accountPlan: 'pro', domainId: null }, null, now).warmup).to.equal(null);
    const bad = { score: 60, totals: { total: 1000, delivered: 920, bounced: 80, complained: 0, failed: 0 } };
    const both = sendPolicyOf(loadConfig({ ENFORCE_WARMUP: 'true' }), { block, accountPlan: 'pro', ...domain }, bad, now);
    expect(both.block.effective).to.deep.equal({ burst: 150, hourly: 250, daily: 100 });
    expect(both.block.throttleReason).to.equal('reputation_low');
    expect(both.block.limits).to.deep.equal({ burst: 300, hourly: 500, daily: 100_000 });
  });
});
