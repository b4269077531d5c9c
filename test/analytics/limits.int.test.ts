import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { postJson } from '../support/motor';
import { senderDomainOf } from '../read-api/publicApi';
import { accepted, startAnalyticsMotor, type AnalyticsMotor } from './support';

const secondsToNextUtcDay = (now: number) => Math.ceil((Math.floor(now / 86_400_000 + 1) * 86_400_000 - now) / 1000);
const secondsToNextUtcHour = (now: number) => Math.ceil((Math.floor(now / 3_600_000 + 1) * 3_600_000 - now) / 1000);

const send = (motor: AnalyticsMotor, b: BootstrapResult, to: string[]) =>
  postJson(`${motor.baseUrl}/v1/send`, { from: `app@${senderDomainOf(b)}`, to, subject: 'Hi', text: 'x' }, { 'X-Api-Key': b.apiKey });
const rcpts = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i}@rcpt.test`);

describe('account and warm-up limits (int)', function () {
  this.timeout(60_000);

  describe('ENFORCE_ACCOUNT_LIMIT=true', () => {
    let motor: AnalyticsMotor;
    before(async () => { motor = await startAnalyticsMotor({ env: { ENFORCE_ACCOUNT_LIMIT: 'true', PLAN_DEFAULT_ACCOUNT_HOURLY: '3' } }); });
    after(async () => { await motor?.close(); });

    it('refuses over the account ceiling with rate_limited_account and Retry-After', async () => {
      const b = await motor.bootstrap();
      expect((await send(motor, b, rcpts(3, 'a'))).status).to.equal(200);
      const refused = await send(motor, b, rcpts(1, 'b'));
      const t = Date.now();
      expect(refused.status).to.equal(429);
      expect(refused.body).to.include({ success: false, code: 'rate_limited_account', dimension: 'acct_hourly' });
      expect(refused.body.retryAfterSeconds).to.be.within(secondsToNextUtcHour(t) - 2, secondsToNextUtcHour(t) + 2);
      expect(refused.headers.get('retry-after')).to.equal(String(refused.body.retryAfterSeconds));
      expect(refused.headers.get('ratelimit-limit')).to.equal('3');
      expect(refused.headers.get('ratelimit-remaining')).to.equal('0');
      const r = await motor.get('/account/rate-limits', await motor.token(b, ['usage.read']));
      expect(r.body.data).to.deep.include({ source: 'plan', enforced: true });
      expect(r.body.data.hourly).to.include({ used: 3, limit: 3, remaining: 0 });
    });

    it('more recipients than the account ceiling is a permanent 422 recipients_exceed_limit, never a 429, and charges nothing', async () => {
      const b = await motor.bootstrap();
      const refused = await send(motor, b, rcpts(4, 'c'));
      expect(refused.status).to.equal(422);
      expect(refused.body).to.deep.include({ success: false, code: 'recipients_exceed_limit', dimension: 'acct_hourly', limit: 3, recipientCount: 4 });
      expect(refused.body.nextAction).to.match(/at most 3 recipients/);
      expect(refused.headers.get('retry-after')).to.equal(null);
      expect(refused.headers.get('ratelimit-limit')).to.equal(null);
      const r = await motor.get('/account/rate-limits', await motor.token(b, ['usage.read']));
      expect(r.body.data.hourly).to.include({ used: 0, limit: 3 });
    });
  });

  describe('ENFORCE_WARMUP=true, account limit measured only', () => {
    let motor: AnalyticsMotor;
    before(async () => { motor = await startAnalyticsMotor({ env: { ENFORCE_WARMUP: 'true', PLAN_DEFAULT_ACCOUNT_HOURLY: '3' } }); });
    after(async () => { await motor?.close(); });

    it('a new domain (warm-up day 1: 50 per UTC day) is refused with rate_limited_warmup, Retry-After only', async () => {
      const b = await motor.bootstrap();
      const token = await motor.token(b, ['usage.read']);
      const before = await motor.get(`/motor-blocks/${b.motorBlockId}/rate-limits`, token);
      expect(before.body.data).to.deep.include({ throttled: true, throttleReason: 'domain_warmup' });
      expect(before.body.data.daily).to.include({ used: 0, limit: 50, remaining: 50 });
      expect(before.body.data.limits.daily).to.equal(motor.config.defaultPlan.daily);

      expect((await send(motor, b, rcpts(50, 'w'))).status).to.equal(200);
      const refused = await send(motor, b, rcpts(1, 'x'));
      const t = Date.now();
      expect(refused.status).to.equal(429);
      expect(refused.body).to.include({ success: false, code: 'rate_limited_warmup', warmupDay: 1, dailyCap: 50 });
      expect(refused.body.retryAfterSeconds).to.be.within(secondsToNextUtcDay(t) - 2, secondsToNextUtcDay(t) + 2);
      expect(refused.headers.get('retry-after')).to.equal(String(refused.body.retryAfterSeconds));
      expect(refused.headers.get('ratelimit-limit')).to.equal(null);
      expect(refused.headers.get('ratelimit-remaining')).to.equal(null);

      // The account ceiling (3 per hour) was passed without refusal: measured only.
      const acct = await motor.get('/account/rate-limits', token);
      expect(acct.body.data).to.deep.include({ source: 'plan', enforced: false });
      expect(acct.body.data.hourly).to.include({ used: 50, limit: 3, remaining: 0 });
    });

    it('an accepted send reports the effective daily ceiling (the warm-up cap and the domain\'s count) in RateLimit-*, as GET rate-limits does', async () => {
      const b = await motor.bootstrap();
      const ok = await send(motor, b, rcpts(2, 'h'));
      expect(ok.status).to.equal(200);
      const r = await motor.get(`/motor-blocks/${b.motorBlockId}/rate-limits`, await motor.token(b, ['usage.read']));
      expect(r.body.data.daily).to.include({ used: 2, limit: 50, remaining: 48 });
      expect(ok.headers.get('ratelimit-limit')).to.equal('50');
      expect(ok.headers.get('ratelimit-remaining')).to.equal('48');
      expect(Number(ok.headers.get('ratelimit-reset'))).to.be.within(r.body.data.daily.resetIn - 2, r.body.data.daily.resetIn + 2);
    });

    it('the warm-up cap is counted per sending domain: two blocks on one domain share it, a block on another domain does not', async () => {
      const a = await motor.bootstrap();
      const a2 = await motor.addBlock(a);
      const other = await motor.bootstrap();
      expect(a2.domainId).to.equal(a.domainId);
      expect((await send(motor, a, rcpts(30, 'p'))).status).to.equal(200);
      // The second block draws on the same day-1 buffer (50): 20 left, so 21 is refused, 20 goes.
      const over = await send(motor, a2, rcpts(21, 'q'));
      expect([over.status, over.body.code, over.body.dailyCap]).to.deep.equal([429, 'rate_limited_warmup', 50]);
      expect(over.body.message).to.contain('30/50');
      const token2 = await motor.token(a2, ['usage.read']);
      const shared = await motor.get(`/motor-blocks/${a2.motorBlockId}/rate-limits`, token2);
      expect(shared.body.data.daily).to.include({ used: 30, limit: 50, remaining: 20 });
      expect((await send(motor, a2, rcpts(20, 'r'))).status).to.equal(200);
      const full = await send(motor, a, rcpts(1, 's'));
      expect([full.status, full.body.code]).to.deep.equal([429, 'rate_limited_warmup']);
      // Another domain has its own buffer.
      expect((await send(motor, other, rcpts(50, 't'))).status).to.equal(200);
    });

    it('day 1 of the schedule is the UTC day of the domain\'s first accepted send (from the analytics read model)', async () => {
      const a = await motor.bootstrap();
      const token = await motor.token(a, ['usage.read']);
      // A first send 3 UTC days ago (projected) puts the domain on day 4: 500 per UTC day.
      const id = randomUUID();
      const at = new Date(Date.now() - 3 * 86_400_000).toISOString();
      await motor.append(id, [{ ...accepted(id, a.motorBlockId, ['x@rcpt.test'], at, a.accountId), data: { ...(accepted(id, a.motorBlockId, ['x@rcpt.test'], at, a.accountId).data as object), domainId: a.domainId } }]);
      await motor.project();
      const r = await motor.get(`/motor-blocks/${a.motorBlockId}/rate-limits`, token);
      expect(r.body.data.daily).to.include({ limit: 500 });
      expect(r.body.data.throttleReason).to.equal('domain_warmup');
    });

    it('plan tiers: ceilings and retention of the account plan; an unknown plan is the fallback', async () => {
      const free = await motor.bootstrap('free');
      const token = await motor.token(free, ['usage.read', 'analytics.read']);
      const acct = await motor.get('/account/rate-limits', token);
      expect(acct.body.data.source).to.equal('plan');
      expect(acct.body.data.hourly.limit).to.equal(200);
      expect(acct.body.data.daily.limit).to.equal(2000);
      const block = await motor.get(`/motor-blocks/${free.motorBlockId}/rate-limits`, token);
      expect(block.body.data.limits).to.deep.equal({ burst: 10, hourly: 100, daily: 1000 });
      expect((await motor.get(`/motor-blocks/${free.motorBlockId}/daily-summary?days=7`, token)).status).to.equal(200);
      const over = await motor.get(`/motor-blocks/${free.motorBlockId}/daily-summary?days=8`, token);
      expect([over.status, over.body.code]).to.deep.equal([400, 'outside_retention_window']);
      const old = await motor.get(`/motor-blocks/${free.motorBlockId}/overview?from=${new Date(Date.now() - 8 * 86_400_000).toISOString()}`, token);
      expect([old.status, old.body.code]).to.deep.equal([400, 'outside_retention_window']);

      const legacy = await motor.bootstrap('legacy-unknown');
      const lt = await motor.token(legacy, ['usage.read']);
      const fb = await motor.get('/account/rate-limits', lt);
      expect(fb.body.data.source).to.equal('fallback');
      expect(fb.body.data.hourly.limit).to.equal(motor.config.accountFallback.hourly);
      expect(fb.body.data.daily.limit).to.equal(motor.config.accountFallback.daily);
    });
  });

  describe('Redis unavailable', () => {
    let motor: AnalyticsMotor;
    before(async () => { motor = await startAnalyticsMotor({ redisUrl: 'redis://127.0.0.1:1' }); });
    after(async () => { await motor?.close(); });

    it('rate limits answer with ceiling-only estimates and the warning fields', async () => {
      const b = await motor.bootstrap();
      const token = await motor.token(b, ['usage.read']);
      const r = await motor.get(`/motor-blocks/${b.motorBlockId}/rate-limits`, token);
      expect(r.status).to.equal(200);
      expect(r.body.warning).to.be.a('string');
      expect(r.body.data.warning).to.equal(undefined);
      expect(r.body.data.daily).to.include({ used: 0, limit: motor.config.defaultPlan.daily, remaining: motor.config.defaultPlan.daily });
      const a = await motor.get('/account/rate-limits', token);
      expect(a.status).to.equal(200);
      expect(a.body.warning).to.equal(undefined);
      expect(a.body.data.warning).to.be.a('string');
      expect(a.body.data.hourly).to.include({ used: 0, limit: motor.config.defaultPlan.accountHourly });
    });
  });
});
