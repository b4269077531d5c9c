import { expect } from 'chai';
import type { BootstrapResult } from '../../commands/admin/bootstrap';
import { awayFromMinuteEdge, getJson, postJson, startTestMotor, type TestMotor } from '../support/motor';
import { bearer, getPublic, senderDomainOf } from './publicApi';

/** The API request limit (SPEC "Limits", limiter 1): per credential, X-RateLimit-*, 429 rate_limited. */
describe('API request limit (int)', function () {
  this.timeout(120_000);

  describe('with Redis', () => {
    let motor: TestMotor;
    let a: BootstrapResult;
    const LIMIT = 5;
    const mail = () => ({ from: `app@${senderDomainOf(a)}`, to: 'user@rcpt.test', subject: 'x', text: 'y' });

    before(async () => {
      motor = await startTestMotor({ roles: ['api', 'projector'], env: { API_REQUEST_LIMIT: String(LIMIT) } });
      a = await motor.bootstrap();
    });
    after(async () => { await motor?.close(); });

    it('counts down X-RateLimit-Remaining per bearer token, then answers 429 rate_limited', async () => {
      const token = await motor.token(a, ['analytics.read']);
      await awayFromMinuteEdge();
      for (let i = 1; i <= LIMIT; i++) {
        const r = await getPublic(motor, '/motor-blocks', token);
        expect(r.status).to.equal(200);
        expect(r.headers.get('x-ratelimit-limit')).to.equal(String(LIMIT));
        expect(r.headers.get('x-ratelimit-remaining')).to.equal(String(LIMIT - i));
        expect(Number(r.headers.get('x-ratelimit-reset'))).to.be.within(1, 60);
      }
      const over = await getPublic(motor, '/motor-blocks', token);
      expect(over.status).to.equal(429);
      expect(over.body).to.include({ success: false, code: 'rate_limited' });
      expect(over.body.retryAfterSeconds).to.be.within(1, 60);
      expect(over.headers.get('retry-after')).to.equal(String(over.body.retryAfterSeconds));
      expect(over.headers.get('x-ratelimit-remaining')).to.equal('0');
      expect(over.headers.get('x-ratelimit-limit')).to.equal(String(LIMIT));
      // Another credential has its own budget.
      const fresh = await motor.token(a, ['analytics.read']);
      const ok = await getPublic(motor, '/motor-blocks', fresh);
      expect(ok.status).to.equal(200);
      expect(ok.headers.get('x-ratelimit-remaining')).to.equal(String(LIMIT - 1));
    });

    it('limits the block key on /v1/send and the account key on token minting the same way', async () => {
      const b = await motor.bootstrap();
      await awayFromMinuteEdge();
      const body = { from: `app@${senderDomainOf(b)}`, to: 'user@rcpt.test', subject: 'x', text: 'y' };
      const sends = [];
      for (let i = 0; i <= LIMIT; i++) sends.push(await postJson(`${motor.baseUrl}/v1/send`, body, { 'x-api-key': b.apiKey }));
      expect(sends.slice(0, LIMIT).map((r) => r.status)).to.deep.equal(Array(LIMIT).fill(200));
      expect(sends.slice(0, LIMIT).map((r) => r.headers.get('x-ratelimit-remaining'))).to.deep.equal(['4', '3', '2', '1', '0']);
      expect(sends[LIMIT].status).to.equal(429);
      expect(sends[LIMIT].body.code).to.equal('rate_limited');
      // The send quota headers (no X- prefix) are not set on a request-limit refusal.
      expect(sends[LIMIT].headers.get('ratelimit-limit')).to.equal(null);

      const mints = [];
      for (let i = 0; i <= LIMIT; i++) {
        mints.push(await postJson(`${motor.baseUrl}/api/public/token/account-key`, { motorBlockId: b.motorBlockId }, { 'x-api-key': b.accountApiKey }));
      }
      expect(mints.slice(0, LIMIT).every((r) => r.status === 200 && r.headers.get('x-ratelimit-limit') === String(LIMIT))).to.equal(true);
      expect(mints[LIMIT].status).to.equal(429);
      expect(mints[LIMIT].body.code).to.equal('rate_limited');
    });

    it('/v1/send: each request counts once whatever its outcome; over the limit nothing is charged and 429 rate_limited wins', async () => {
      const c = await motor.bootstrap();
      const body = { from: `app@${senderDomainOf(c)}`, to: 'user@rcpt.test', subject: 'x', text: 'y' };
      const send = (b: object, headers: Record<string, string> = {}) => postJson(`${motor.baseUrl}/v1/send`, b, { 'x-api-key': c.apiKey, ...headers });
      const dailyUsed = async () => (await motor.rt.quota.read(c.motorBlockId, c.accountId, new Date()))!.daily;
      await awayFromMinuteEdge();
      const outcomes = [
        await send(body),
        await send(body, { 'idempotency-key': 'k-1' }),
        await send(body, { 'idempotency-key': 'k-1' }),
        await send({ ...body, dryRun: true }),
        await send({ ...body, subject: 42 }),
      ];
      expect(outcomes.map((r) => r.status)).to.deep.equal([200, 200, 200, 200, 422]);
      expect(outcomes[2].body.idempotent).to.equal(true);
      expect(outcomes.map((r) => r.headers.get('x-ratelimit-remaining'))).to.deep.equal(['4', '3', '2', '1', '0']);
      expect(await dailyUsed()).to.equal(2);
      // Over the limit: a valid send is refused and not charged; a bad body or key also gets 429, not 422.
      const over = [await send(body), await send({ ...body, subject: 42 }), await send(body, { 'idempotency-key': ' ' }), await send({ ...body, dryRun: true })];
      expect(over.map((r) => [r.status, r.body.code])).to.deep.equal(Array(4).fill([429, 'rate_limited']));
      expect(over.every((r) => r.headers.get('x-ratelimit-remaining') === '0' && r.headers.get('ratelimit-limit') === null)).to.equal(true);
      expect(await dailyUsed()).to.equal(2);
    });

    it('a valid token refused for its scope is counted and carries X-RateLimit-* like any request of it', async () => {
      const token = await motor.token(a, ['analytics.read']);
      await awayFromMinuteEdge();
      const lacking = [];
      for (let i = 1; i <= LIMIT; i++) lacking.push(await getPublic(motor, `/motor-blocks/${a.motorBlockId}/logs`, token));
      expect(lacking.map((r) => [r.status, r.body.code])).to.deep.equal(Array(LIMIT).fill([403, 'insufficient_scope']));
      expect(lacking.map((r) => r.headers.get('x-ratelimit-remaining'))).to.deep.equal(['4', '3', '2', '1', '0']);
      expect(lacking.every((r) => r.headers.get('x-ratelimit-limit') === String(LIMIT) && Number(r.headers.get('x-ratelimit-reset')) >= 1)).to.equal(true);
      // Its budget is spent: a route it has the scope for is refused too, and the refused scope is over the limit as well.
      const over = [await getPublic(motor, '/motor-blocks', token), await getPublic(motor, `/motor-blocks/${a.motorBlockId}/logs`, token)];
      expect(over.map((r) => [r.status, r.body.code])).to.deep.equal([[429, 'rate_limited'], [429, 'rate_limited']]);
    });

    it('omits the headers on unauthenticated utility endpoints and on authentication failures', async () => {
      for (const path of ['/v1/status', '/healthz']) {
        const r = await getJson(`${motor.baseUrl}${path}`);
        expect(r.status, path).to.equal(200);
        expect(r.headers.get('x-ratelimit-limit'), path).to.equal(null);
      }
      const r = await postJson(`${motor.baseUrl}/v1/send`, mail(), { 'x-api-key': 'mk_live_bad' });
      expect(r.status).to.equal(401);
      expect(r.headers.get('x-ratelimit-limit')).to.equal(null);
    });
  });

  describe('with Redis unavailable', () => {
    let motor: TestMotor;
    let a: BootstrapResult;

    before(async () => {
      motor = await startTestMotor({ roles: ['api'], redisUrl: 'redis://127.0.0.1:1' });
      a = await motor.bootstrap();
    });
    after(async () => { await motor?.close(); });

    it('accepts a send (200) without RateLimit-* numbers, and says X-RateLimit-Remaining: unknown', async () => {
      const started = Date.now();
      const r = await postJson(`${motor.baseUrl}/v1/send`, { from: `app@${senderDomainOf(a)}`, to: 'user@rcpt.test', subject: 'x', text: 'y' }, { 'x-api-key': a.apiKey });
      expect(r.status).to.equal(200);
      expect(r.body.data.acceptanceStatus).to.equal('queued');
      expect(Date.now() - started).to.be.below(3000);
      expect(r.headers.get('ratelimit-limit')).to.equal(null);
      expect(r.headers.get('ratelimit-remaining')).to.equal(null);
      expect(r.headers.get('ratelimit-reset')).to.equal(null);
      expect(r.headers.get('x-ratelimit-remaining')).to.equal('unknown');
      expect(r.headers.get('x-ratelimit-limit')).to.equal(String(motor.config.apiRequestLimit));
      // SPEC "Limits": only Remaining becomes `unknown`; the window is the clock's, so Reset is still given.
      expect(Number(r.headers.get('x-ratelimit-reset'))).to.be.within(1, 60);

      const token = await motor.token(a, ['logs.read']);
      const read = await getPublic(motor, `/messages/${r.body.data.id}`, token);
      expect(read.status).to.equal(200);
      expect(read.headers.get('x-ratelimit-remaining')).to.equal('unknown');
      expect(Number(read.headers.get('x-ratelimit-reset'))).to.be.within(1, 60);
      const mint = await postJson(`${motor.baseUrl}/api/public/token/account-key`, { motorBlockId: a.motorBlockId }, { 'x-api-key': a.accountApiKey });
      expect(mint.status).to.equal(200);
      expect(mint.headers.get('x-ratelimit-remaining')).to.equal('unknown');
      expect((await getJson(`${motor.baseUrl}/api/public/v1/motor-blocks`, bearer(token))).status).to.equal(200);
    });

    it('/v1/status reports Redis down but the send API operational', async () => {
      const r = await getJson(`${motor.baseUrl}/v1/status`);
      expect(r.status).to.equal(200);
      expect(r.body.status).to.equal('operational');
      expect(r.body.components.redis.ok).to.equal(false);
      expect(r.body.components.eventStore.ok).to.equal(true);
    });
  });
});
